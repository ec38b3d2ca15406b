#define _GNU_SOURCE
#include "risc_spawn.h"
#include <fcntl.h>
#include <unistd.h>
#include <signal.h>
#include <errno.h>
#include <spawn.h>

extern char **environ;

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

int risc_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], const char *cwd, int in, int out, int err) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int rc = posix_spawn_file_actions_init(&actions);
    if (rc != 0) return rc;
    rc = posix_spawnattr_init(&attributes);
    if (rc != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return rc;
    }
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    if (rc == 0) rc = posix_spawnattr_setsigmask(&attributes, &none);
    if (rc == 0) rc = posix_spawnattr_setsigdefault(&attributes, &all);
    if (rc == 0) rc = posix_spawnattr_setpgroup(&attributes, 0);
    if (rc == 0) rc = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    const int sources[3] = {in, out, err};
    for (int fd = 0; fd < 3 && rc == 0; fd++) {
        if (sources[fd] < 0) {
            rc = posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0);
        } else {
            rc = posix_spawn_file_actions_adddup2(&actions, sources[fd], fd);
        }
    }
    if (rc == 0 && cwd != NULL) rc = posix_spawn_file_actions_addchdir_np(&actions, cwd);
    if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    if (rc == 0) rc = posix_spawn(pid, path, &actions, &attributes, argv, envp != NULL ? envp : environ);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return rc;
}
