/* test_config.c: the TNT_* settings. Every numeric and enumerated variable with a bad value
 * gives an error naming the variable, the value and what was expected, from the reader and from
 * tnt_init, and leaves the settings as they were; good values parse whole and in range; tnt_init
 * reads them once. */
#include "testutil.h"

#include "core/config.h"

#include <stdlib.h>
#include <string.h>

static const char *const variables[] = {
    "TNT_LOG_LEVEL", "TNT_LOG_ON_ALL_DEVICES", "TNT_OUTPUT_ON_ALL_DEVICES", "TNT_TENSORBOARD_ON_ALL_DEVICES",
    "TNT_STDOUT_TTY", "TNT_FORCE_MPI", "TNT_FUSION_THRESHOLD_KB", "TNT_COMM_MODE", "TNT_CROSS_NODE",
    "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
};

static int clear_environment(void **state) {
    (void)state;
    for (size_t i = 0; i < TNT_ARRAY_LEN(variables); i++) unsetenv(variables[i]);
    return 0;
}

static void test_defaults(void **state) {
    (void)state;
    tnt__config c;
    tu_ok(tnt__config_read(&c));
    assert_int_equal(c.log_level, TNT_LOG_WARNING);
    assert_false(c.log_on_all_devices || c.output_on_all_devices || c.tensorboard_on_all_devices);
    assert_int_equal(c.stdout_tty, -1);
    assert_false(c.force_mpi || c.under_mpirun);
    assert_int_equal(c.fusion_threshold_kb, 32);
    assert_int_equal(c.comm_mode, TNT_COMM_MODE_THREAD);
    assert_int_equal(c.cross_node, TNT__CROSS_NODE_AUTO);
    setenv("TNT_FUSION_THRESHOLD_KB", "", 1); /* empty is unset */
    tu_ok(tnt__config_read(&c));
    assert_int_equal(c.fusion_threshold_kb, 32);
}

static void test_good_values(void **state) {
    (void)state;
    setenv("TNT_LOG_LEVEL", "debug", 1);
    setenv("TNT_LOG_ON_ALL_DEVICES", "1", 1);
    setenv("TNT_OUTPUT_ON_ALL_DEVICES", "TRUE", 1);
    setenv("TNT_TENSORBOARD_ON_ALL_DEVICES", "yes", 1);
    setenv("TNT_STDOUT_TTY", "0", 1);
    setenv("TNT_FORCE_MPI", "no", 1);
    setenv("TNT_FUSION_THRESHOLD_KB", "2147483647", 1);
    setenv("TNT_COMM_MODE", "Nonblocking", 1);
    setenv("TNT_CROSS_NODE", "Halving", 1);
    setenv("PMI_RANK", "", 1); /* present: a launcher started the process */
    tnt__config c;
    tu_ok(tnt__config_read(&c));
    assert_int_equal(c.log_level, TNT_LOG_DEBUG);
    assert_true(c.log_on_all_devices && c.output_on_all_devices && c.tensorboard_on_all_devices);
    assert_int_equal(c.stdout_tty, 0);
    assert_false(c.force_mpi);
    assert_true(c.under_mpirun);
    assert_int_equal(c.fusion_threshold_kb, 2147483647);
    assert_int_equal(c.comm_mode, TNT_COMM_MODE_NONBLOCKING);
    assert_int_equal(c.cross_node, TNT__CROSS_NODE_HALVING);
    setenv("TNT_FUSION_THRESHOLD_KB", "0", 1);
    setenv("TNT_STDOUT_TTY", "1", 1);
    tu_ok(tnt__config_read(&c));
    assert_int_equal(c.fusion_threshold_kb, 0);
    assert_int_equal(c.stdout_tty, 1);
}

static void test_bad_values(void **state) {
    (void)state;
    static const struct {
        const char *name, *value, *message;
    } cases[] = {
        {"TNT_FUSION_THRESHOLD_KB", "abc", "TNT_FUSION_THRESHOLD_KB=abc: expected an integer from 0 to 2147483647"},
        {"TNT_FUSION_THRESHOLD_KB", "-1", "TNT_FUSION_THRESHOLD_KB=-1: expected an integer"},
        {"TNT_FUSION_THRESHOLD_KB", "12kb", "TNT_FUSION_THRESHOLD_KB=12kb: expected an integer"},
        {"TNT_FUSION_THRESHOLD_KB", "1.5", "TNT_FUSION_THRESHOLD_KB=1.5: expected an integer"},
        {"TNT_FUSION_THRESHOLD_KB", " 8", "TNT_FUSION_THRESHOLD_KB= 8: expected an integer"},
        {"TNT_FUSION_THRESHOLD_KB", "+8", "TNT_FUSION_THRESHOLD_KB=+8: expected an integer"},
        {"TNT_FUSION_THRESHOLD_KB", "2147483648", "TNT_FUSION_THRESHOLD_KB=2147483648: expected an integer"},
        {"TNT_FUSION_THRESHOLD_KB", "99999999999999999999", "=99999999999999999999: expected an integer"},
        {"TNT_COMM_MODE", "bogus", "TNT_COMM_MODE=bogus: expected thread or nonblocking"},
        {"TNT_CROSS_NODE", "tree", "TNT_CROSS_NODE=tree: expected auto, mpi, ring, halving or doubling"},
        {"TNT_LOG_LEVEL", "loud", "TNT_LOG_LEVEL=loud: expected DEBUG, INFO, WARNING or ERROR"},
        {"TNT_STDOUT_TTY", "2", "TNT_STDOUT_TTY=2: expected 1 or 0"},
        {"TNT_FORCE_MPI", "maybe", "TNT_FORCE_MPI=maybe: expected 1, 0, true, false, yes or no"},
        {"TNT_LOG_ON_ALL_DEVICES", "2", "TNT_LOG_ON_ALL_DEVICES=2: expected 1, 0"},
        {"TNT_OUTPUT_ON_ALL_DEVICES", "on", "TNT_OUTPUT_ON_ALL_DEVICES=on: expected 1, 0"},
        {"TNT_TENSORBOARD_ON_ALL_DEVICES", "True!", "TNT_TENSORBOARD_ON_ALL_DEVICES=True!: expected 1, 0"},
    };
    for (size_t i = 0; i < TNT_ARRAY_LEN(cases); i++) {
        setenv(cases[i].name, cases[i].value, 1);
        tnt__config c = {.fusion_threshold_kb = -7};
        assert_int_equal(tnt__config_read(&c), TNT_ERR_ARG);
        tu_error_contains(cases[i].message);
        assert_int_equal(c.fusion_threshold_kb, -7); /* untouched */
        unsetenv(cases[i].name);
    }
}

/* tnt_init reports a bad value and keeps the settings; a good environment is read at tnt_init
 * and only then. */
static void test_read_once_by_tnt_init(void **state) {
    (void)state;
    setenv("TNT_COMM_MODE", "bogus", 1);
    int argc = 1;
    char *args[] = {"test_config", NULL}, **argv = args;
    assert_int_equal(tnt_init(&argc, &argv), TNT_ERR_ARG);
    tu_error_contains("tnt_init: TNT_COMM_MODE=bogus: expected thread or nonblocking");
    assert_int_equal(tnt__config_get()->comm_mode, TNT_COMM_MODE_THREAD);
    setenv("TNT_COMM_MODE", "nonblocking", 1);
    setenv("TNT_FUSION_THRESHOLD_KB", "7", 1);
    tu_ok(tnt_init(&argc, &argv));
    assert_int_equal(tnt_get_size(), 1);
    setenv("TNT_FUSION_THRESHOLD_KB", "abc", 1); /* after tnt_init: not read */
    assert_int_equal(tnt__config_get()->fusion_threshold_kb, 7);
    assert_int_equal(tnt__config_get()->comm_mode, TNT_COMM_MODE_NONBLOCKING);
    tu_ok(tnt_init(&argc, &argv)); /* initialized already: nothing read again */
    assert_int_equal(tnt__config_get()->fusion_threshold_kb, 7);
    tnt_finalize();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_defaults, clear_environment),
        cmocka_unit_test_setup(test_good_values, clear_environment),
        cmocka_unit_test_setup(test_bad_values, clear_environment),
        cmocka_unit_test_setup(test_read_once_by_tnt_init, clear_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
