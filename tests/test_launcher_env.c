/* test_launcher_env.c: which launcher started a process, read from its environment, and the
 * check that refuses a world other than the launcher's (comm/launcher_env.c); the settings that
 * carry them (core/config.c). The end-to-end case, programs started with a fake launcher
 * environment and no MPI world, is tests/lone_rank/test_lone_rank.sh. */
#include "testutil.h"

#include "comm/launcher_env.h"
#include "core/config.h"

#include <stdlib.h>
#include <string.h>

static const char *const variables[] = {
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
    "SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "TNT_MPI_THREAD_LEVEL",
};

static int clear_environment(void **state) {
    (void)state;
    for (size_t i = 0; i < TNT_ARRAY_LEN(variables); i++) unsetenv(variables[i]);
    return 0;
}

static void detect(tnt__launch *l) {
    tnt__config c;
    tu_ok(tnt__config_read(&c));
    tnt__launch_detect(&c, l);
}

static void test_no_launcher(void **state) {
    (void)state;
    tnt__launch l;
    detect(&l);
    assert_null(l.by);
    assert_int_equal(l.size, -1);
    tu_ok(tnt__launch_check(&l, 0, 1, NULL));
    /* a Slurm batch script, or a step of one task: no launcher of ranks */
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURM_STEP_NUM_TASKS", "4", 1); /* inherited, but no SLURM_STEP_ID: not a step */
    detect(&l);
    assert_null(l.by);
    setenv("SLURM_STEP_ID", "3", 1);
    setenv("SLURM_STEP_NUM_TASKS", "1", 1);
    detect(&l);
    assert_null(l.by);
}

static void test_each_launcher(void **state) {
    (void)state;
    static const struct {
        const char *vars[3][2];
        const char *by, *evidence;
        int64_t size, rank;
    } cases[] = {
        {{{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"}, {"PMI_SIZE", "9"}},
         "Open MPI's mpirun", "OMPI_COMM_WORLD_SIZE=4, OMPI_COMM_WORLD_RANK=3", 4, 3},
        {{{"PMI_SIZE", "4"}, {"PMI_RANK", "1"}, {"SLURM_STEP_ID", "0"}},
         "a PMI launcher", "PMI_SIZE=4, PMI_RANK=1", 4, 1},
        {{{"PMI_RANK", "2"}}, "a PMI launcher", "PMI_RANK=2", -1, 2},
        {{{"PMIX_RANK", "5"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "8"}},
         "a PMIx launcher", "PMIX_RANK=5, SLURM_STEP_NUM_TASKS=8", 8, 5},
        {{{"PMIX_RANK", "5"}, {"SLURM_STEP_NUM_TASKS", "8"}}, "a PMIx launcher", "PMIX_RANK=5", -1, 5},
        {{{"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"}},
         "Slurm's srun", "SLURM_STEP_NUM_TASKS=2, SLURM_PROCID=1", 2, 1},
    };
    for (size_t i = 0; i < TNT_ARRAY_LEN(cases); i++) {
        clear_environment(NULL);
        for (int k = 0; k < 3 && cases[i].vars[k][0]; k++) setenv(cases[i].vars[k][0], cases[i].vars[k][1], 1);
        tnt__launch l;
        detect(&l);
        assert_non_null(l.by);
        assert_true(!strncmp(l.by, cases[i].by, strlen(cases[i].by)));
        assert_string_equal(l.evidence, cases[i].evidence);
        assert_int_equal(l.size, cases[i].size);
        assert_int_equal(l.rank, cases[i].rank);
    }
}

static void test_empty_launcher_variable(void **state) {
    (void)state;
    setenv("PMI_RANK", "", 1); /* present, no number */
    tnt__launch l;
    detect(&l);
    assert_string_equal(l.by, "an MPI launcher");
    tu_ok(tnt__launch_check(&l, 0, 1, NULL)); /* nothing to compare with */
}

static void test_bad_launcher_values(void **state) {
    (void)state;
    static const struct {
        const char *name, *value, *message;
    } cases[] = {
        {"PMI_SIZE", "four", "PMI_SIZE=four: expected an integer from 1 to 2147483647"},
        {"PMI_SIZE", "0", "PMI_SIZE=0: expected an integer from 1"},
        {"OMPI_COMM_WORLD_SIZE", "-2", "OMPI_COMM_WORLD_SIZE=-2: expected an integer from 1"},
        {"SLURM_PROCID", "x", "SLURM_PROCID=x: expected an integer from 0"},
        {"TNT_MPI_THREAD_LEVEL", "some", "TNT_MPI_THREAD_LEVEL=some: expected single, funneled, serialized or multiple"},
    };
    for (size_t i = 0; i < TNT_ARRAY_LEN(cases); i++) {
        setenv(cases[i].name, cases[i].value, 1);
        tnt__config c;
        assert_int_equal(tnt__config_read(&c), TNT_ERR_ARG);
        tu_error_contains(cases[i].message);
        unsetenv(cases[i].name);
    }
}

static void test_thread_level_setting(void **state) {
    (void)state;
    tnt__config c;
    tu_ok(tnt__config_read(&c));
    assert_int_equal(c.mpi_thread_level, TNT__THREAD_SERIALIZED);
    static const struct {
        const char *value;
        int level;
    } cases[] = {{"single", TNT__THREAD_SINGLE}, {"FUNNELED", TNT__THREAD_FUNNELED},
                 {"Serialized", TNT__THREAD_SERIALIZED}, {"multiple", TNT__THREAD_MULTIPLE}};
    for (size_t i = 0; i < TNT_ARRAY_LEN(cases); i++) {
        setenv("TNT_MPI_THREAD_LEVEL", cases[i].value, 1);
        tu_ok(tnt__config_read(&c));
        assert_int_equal(c.mpi_thread_level, cases[i].level);
    }
}

/* The world a launcher made is accepted; any other is an error that says what happened. */
static void test_check(void **state) {
    (void)state;
    setenv("PMI_SIZE", "4", 1);
    setenv("PMI_RANK", "1", 1);
    tnt__launch l;
    detect(&l);
    tu_ok(tnt__launch_check(&l, 1, 4, "MPICH Version: 4.0.2"));
    assert_int_equal(tnt__launch_check(&l, 0, 1, "Open MPI v4.1.4"), TNT_ERR_MPI);
    tu_error_contains("a PMI launcher (MPICH's mpiexec, Intel MPI's mpirun or srun --mpi=pmi2) started this "
                      "process as rank 1 of 4 (PMI_SIZE=4, PMI_RANK=1), but the MPI world it joined has 1 rank "
                      "(this is rank 0): it would train alone. Run the program with the mpirun of the MPI it was "
                      "built with (Open MPI v4.1.4)");
    assert_int_equal(tnt__launch_check(&l, 1, 2, NULL), TNT_ERR_MPI);
    tu_error_contains("has 2 ranks (this is rank 1): it would train without the other ranks.");
    clear_environment(NULL);
    setenv("PMIX_RANK", "3", 1); /* size unknown: any world passes */
    detect(&l);
    tu_ok(tnt__launch_check(&l, 0, 1, NULL));
    setenv("SLURM_STEP_ID", "7", 1);
    setenv("SLURM_STEP_NUM_TASKS", "6", 1);
    detect(&l);
    assert_int_equal(tnt__launch_check(&l, 0, 1, NULL), TNT_ERR_MPI);
    tu_error_contains("as rank 3 of 6 (PMIX_RANK=3, SLURM_STEP_NUM_TASKS=6)");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_no_launcher, clear_environment),
        cmocka_unit_test_setup(test_each_launcher, clear_environment),
        cmocka_unit_test_setup(test_empty_launcher_variable, clear_environment),
        cmocka_unit_test_setup(test_bad_launcher_values, clear_environment),
        cmocka_unit_test_setup(test_thread_level_setting, clear_environment),
        cmocka_unit_test_setup(test_check, clear_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
