#ifndef RISC_SPAWN_H
#define RISC_SPAWN_H
#include <sys/types.h>

/// Starts argv[0] (a path) with argv, standard input from /dev/null, standard output and error
/// appended to the given files, and every other descriptor of this process closed, so that a
/// daemon it leaves behind holds nothing of ours (a pipe, a socket). Returns the child's pid, or
/// -1 with errno set.
pid_t risc_spawn_detached_io(char *const argv[], const char *out_path, const char *err_path);

#endif
