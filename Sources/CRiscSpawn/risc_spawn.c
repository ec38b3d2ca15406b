#define _GNU_SOURCE
#include "risc_spawn.h"
#include <fcntl.h>
#include <unistd.h>
#include <signal.h>
#include <errno.h>

pid_t risc_spawn_detached_io(char *const argv[], const char *out_path, const char *err_path) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    // In the child: only async-signal-safe calls until exec.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int in = open("/dev/null", O_RDONLY);
    int out = open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    int err = open(err_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
    closefrom(3);
    execv(argv[0], argv);
    _exit(127);
}
