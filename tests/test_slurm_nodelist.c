/* test_slurm_nodelist.c: the launcher's reading of a Slurm allocation (tools/launcher/slurm.c):
 * compressed node lists (ranges, lists in brackets, zero padding, several bracket groups, plain
 * names) expand to Slurm's order, tasks per node ("2(x3),1") cover the nodes exactly, and every bad
 * list or count is an error that names it and says what is wrong. The fuzz target
 * tests/fuzz/fuzz_slurm.c checks that no input crashes or loops. */
#include "testutil.h"

#include "launcher/slurm.h"

#include <stdlib.h>
#include <string.h>

/* Expands list and compares with want, the names joined by ' '. */
static void expands_to(const char *list, const char *want) {
    hostlist h = {0};
    char err[512] = "";
    if (slurm_nodelist_expand(list, &h, err, sizeof err)) fail_msg("'%s': %s", list, err);
    char got[4096] = "";
    for (size_t i = 0; i < h.n; i++) {
        strcat(got, i ? " " : "");
        strcat(got, h.names[i]);
        assert_int_equal(h.slots[i], 0);
    }
    if (strcmp(got, want)) fail_msg("'%s' expanded to '%s', expected '%s'", list, got, want);
    hostlist_free(&h);
}

static void fails_with(const char *list, const char *message) {
    hostlist h = {0};
    char err[512] = "";
    assert_int_equal(slurm_nodelist_expand(list, &h, err, sizeof err), 1);
    if (!strstr(err, message)) fail_msg("'%s': error '%s' lacks '%s'", list, err, message);
    hostlist_free(&h);
}

static void test_expansion(void **state) {
    (void)state;
    expands_to("node07", "node07");
    expands_to("node[01-04,07]", "node01 node02 node03 node04 node07");
    expands_to("a[1-2],b3", "a1 a2 b3");
    expands_to("n[8-11]", "n8 n9 n10 n11");
    expands_to("n[08-11]", "n08 n09 n10 n11");
    expands_to("n[098-101]", "n098 n099 n100 n101");
    expands_to("rack[1-2]-n[01-03]", "rack1-n01 rack1-n02 rack1-n03 rack2-n01 rack2-n02 rack2-n03");
    expands_to("[1-2]x", "1x 2x");
    expands_to("c[5],d[1,3]e", "c5 d1e d3e");
    expands_to("gpu-a100-[1-2].cluster.org,login", "gpu-a100-1.cluster.org gpu-a100-2.cluster.org login");
    expands_to("10.0.0.[1-3]", "10.0.0.1 10.0.0.2 10.0.0.3");
    /* the largest list taken */
    hostlist h = {0};
    char err[256];
    assert_int_equal(slurm_nodelist_expand("n[1-65536]", &h, err, sizeof err), 0);
    assert_int_equal(h.n, 65536);
    assert_string_equal(h.names[65535], "n65536");
    hostlist_free(&h);
}

static void test_bad_lists(void **state) {
    (void)state;
    fails_with("", "Slurm node list is empty");
    fails_with("node[01-04", "Slurm node list 'node[01-04': '[' without ']'");
    fails_with("node01-04]", "']' without '['");
    fails_with("n[[1]]", "expected a number of 1 to 9 digits in brackets at '[1]]'");
    fails_with("n[]", "expected a number of 1 to 9 digits in brackets at ']'");
    fails_with("n[1-]", "expected the upper bound of a range after '-'");
    fails_with("n[5-2]", "range 5-2 runs backwards");
    fails_with("n[1:3]", "unexpected ':' in brackets");
    fails_with("n[1234567890]", "expected a number of 1 to 9 digits");
    fails_with("a,,b", "an empty name (two commas, or one at the start or end)");
    fails_with(",a", "an empty name");
    fails_with("a,", "an empty name");
    fails_with("n[1-70000]", "more than 65536 hosts");
    fails_with("a[1-300]b[1-300]", "more than 65536 hosts");
    fails_with("a[1-40000],b[1-40000]", "more than 65536 hosts");
    fails_with("n[1-2],n2", "host 'n2' is listed twice");
    fails_with("N1,n1", "is listed twice");
    fails_with("node_[1-2]", "invalid host name 'node_1': only letters, digits, '-' and '.' are allowed");
    fails_with("-n[1-2]", "starts or ends with '-'");
    char long_name[300];
    memset(long_name, 'a', 260);
    strcpy(long_name + 260, "[1-2]");
    fails_with(long_name, "a host name longer than 253 characters");
    fails_with("bell\a", "invalid host name 'bell?'");
}

static void tasks_are(const char *spec, size_t n, const long *want) {
    long got[16];
    char err[256] = "";
    if (slurm_tasks_per_node(spec, n, got, err, sizeof err)) fail_msg("'%s': %s", spec, err);
    for (size_t i = 0; i < n; i++) assert_int_equal(got[i], want[i]);
}

static void tasks_fail(const char *spec, size_t n, const char *message) {
    long got[16];
    char err[256] = "";
    assert_int_equal(slurm_tasks_per_node(spec, n, got, err, sizeof err), 1);
    if (!strstr(err, message)) fail_msg("'%s': error '%s' lacks '%s'", spec, err, message);
}

static void test_tasks_per_node(void **state) {
    (void)state;
    tasks_are("2(x3),1", 4, (long[]){2, 2, 2, 1});
    tasks_are("4", 1, (long[]){4});
    tasks_are("1,2,3", 3, (long[]){1, 2, 3});
    tasks_are("16(x2)", 2, (long[]){16, 16});
    tasks_fail("", 1, "empty (expected e.g. '2(x3),1')");
    tasks_fail("2(x3)", 2, "counts for more than the 2 nodes of the list");
    tasks_fail("2(x3)", 4, "counts for 3 nodes, the node list has 4");
    tasks_fail("2(x0)", 1, "expected '(xN)' with N >= 1 after 2");
    tasks_fail("2(x3", 3, "expected '(xN)' with N >= 1 after 2");
    tasks_fail("0", 1, "expected a count from 1 to 100000");
    tasks_fail("two", 1, "expected a count from 1 to 100000");
    tasks_fail("2;3", 2, "unexpected ';' (expected ',' or the end)");
    tasks_fail("1,", 1, "expected a count from 1 to 100000");
}

static void test_allocation(void **state) {
    (void)state;
    slurm_env e = {.job_id = "7", .nodelist = "node[01-03],gpu7", .tasks_per_node = "2(x3),1"};
    hostlist h = {0};
    char err[512] = "";
    assert_int_equal(slurm_hosts(&e, &h, err, sizeof err), 0);
    assert_int_equal(h.n, 4);
    assert_string_equal(h.names[3], "gpu7");
    assert_int_equal(h.slots[0], 2);
    assert_int_equal(h.slots[3], 1);
    hostlist_free(&h);
    e.ntasks_per_node = "3"; /* wins over SLURM_TASKS_PER_NODE */
    assert_int_equal(slurm_hosts(&e, &h, err, sizeof err), 0);
    assert_int_equal(h.slots[3], 3);
    hostlist_free(&h);
    e = (slurm_env){.job_id = "7", .nodelist = "a[1-2]"}; /* no task counts: slots not given */
    assert_int_equal(slurm_hosts(&e, &h, err, sizeof err), 0);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.slots[1], 0);
    hostlist_free(&h);
    e.tasks_per_node = "1(x3)";
    assert_int_equal(slurm_hosts(&e, &h, err, sizeof err), 1);
    assert_non_null(strstr(err, "SLURM_TASKS_PER_NODE=1(x3): Slurm tasks per node '1(x3)': counts for more than the 2 nodes"));
    hostlist_free(&h);
    e = (slurm_env){.job_id = "7", .nodelist = "a[2-1]"};
    assert_int_equal(slurm_hosts(&e, &h, err, sizeof err), 1);
    assert_non_null(strstr(err, "SLURM_JOB_NODELIST=a[2-1]: Slurm node list 'a[2-1]': range 2-1 runs backwards"));
    hostlist_free(&h);
    e = (slurm_env){.job_id = "7", .nodelist = "a1", .ntasks_per_node = "4x"};
    assert_int_equal(slurm_hosts(&e, &h, err, sizeof err), 1);
    assert_non_null(strstr(err, "SLURM_NTASKS_PER_NODE=4x: expected a count from 1 to 100000"));
    hostlist_free(&h);
}

static void test_env_read(void **state) {
    (void)state;
    slurm_env e;
    unsetenv("SLURM_JOB_ID"), unsetenv("SLURM_JOBID"), unsetenv("SLURM_JOB_NODELIST"), unsetenv("SLURM_NODELIST");
    assert_false(slurm_env_read(&e));
    setenv("SLURM_JOBID", "12", 1);
    setenv("SLURM_NODELIST", "n[1-2]", 1);
    assert_true(slurm_env_read(&e));
    assert_string_equal(e.job_id, "12");
    assert_string_equal(e.nodelist, "n[1-2]");
    setenv("SLURM_JOB_NODELIST", "m1", 1); /* the newer name first */
    assert_true(slurm_env_read(&e));
    assert_string_equal(e.nodelist, "m1");
    setenv("SLURM_JOB_ID", "", 1); /* empty is unset: the old name still counts */
    assert_true(slurm_env_read(&e));
    unsetenv("SLURM_JOBID");
    assert_false(slurm_env_read(&e));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expansion),
        cmocka_unit_test(test_bad_lists),
        cmocka_unit_test(test_tasks_per_node),
        cmocka_unit_test(test_allocation),
        cmocka_unit_test(test_env_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
