/* no_dlclose.c: preloaded into the MPI ranks of a sanitizer build (tests/CMakeLists.txt), it
 * makes dlclose keep every module mapped. Open MPI unloads its plugins (mca_*.so) at
 * MPI_Finalize, before LeakSanitizer looks; their allocations that outlive it then show frames of
 * no module, which no suppression can match. With the plugins still mapped the frames have names,
 * tests/sanitize/lsan_mpi.supp drops the MPI libraries' own leaks, and the leak check of the MPI
 * tests sees ours. */
int dlclose(void *handle);

int dlclose(void *handle) {
    (void)handle;
    return 0;
}
