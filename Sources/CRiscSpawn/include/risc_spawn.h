#ifndef RISC_SPAWN_H
#define RISC_SPAWN_H
#include <sys/types.h>

/// Starts `path` with `argv` and `envp` (NULL: this process's environment) in `cwd` (NULL: this
/// process's), in a process group of its own, with an empty signal mask and every signal's default
/// action, and its standard input, output and error from `in`, `out` and `err` (-1: /dev/null).
/// Every other descriptor is closed in the child (`closefrom`, one system call): Foundation's
/// `Process` lists /proc/self/fd for that and reads past glibc's directory buffer when it has more
/// than about 1,365 entries, a crash when that buffer ends a mapping. Returns 0 with `*pid` set,
/// or an errno value.
int risc_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], const char *cwd, int in, int out, int err);

/// Makes stdio's standard output line-buffered (Swift 6's strict concurrency refuses C's mutable
/// global `stdout`): for a process whose children write to the same file, so that its lines and
/// theirs come out whole and in order.
void risc_stdout_by_lines(void);

#endif
