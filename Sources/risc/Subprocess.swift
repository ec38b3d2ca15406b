import Foundation

/// Runs a program found on PATH and returns its standard output, or nil if it could not run.
///
/// The child starts with an empty signal mask and default dispositions: Swift's runtime blocks
/// signals such as SIGALRM on its threads, and a child that inherits that mask (as with
/// Foundation's `Process`) never sees the alarm `openssl speed` times itself with.
func runWithDefaultSignals(_ arguments: [String]) -> String? {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    var all = sigset_t()
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

    var pipeEnds: [Int32] = [0, 0]
    // Close-on-exec: a child spawned at the same time by another thread must not inherit the
    // write end (the read below would then wait for that child's exit too).
    guard pipe(&pipeEnds) == 0 else { return nil }
    for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
    posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)

    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let spawned = posix_spawnp(&pid, arguments[0], &actions, &attributes, &argv, environ)
    close(pipeEnds[1])
    guard spawned == 0 else {
        close(pipeEnds[0])
        return nil
    }
    let output = FileHandle(fileDescriptor: pipeEnds[0], closeOnDealloc: true).readDataToEndOfFile()
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    return String(decoding: output, as: UTF8.self)
}
