public import Foundation

extension ChildProcess {
    /// How a child run by `runToEnd` ended, and what it wrote.
    public struct Finished: Sendable {
        public let status: Int32
        public let reason: TerminationReason
        /// Its standard output and error; empty for a stream set to a `FileHandle` beforehand.
        public let output: Data
        public let errorOutput: Data

        /// Exited with status 0.
        public var succeeded: Bool { reason == .exit && status == 0 }
    }

    /// Runs the child to its end on the calling thread: writes `input` to its standard input (then
    /// closes it; without `input` it reads /dev/null unless `standardInput` is set), reads its
    /// standard output and error as they come, both at once (`poll`), and waits for its exit. A
    /// stream set beforehand (a `FileHandle`) is left as it is. Writing all the input before
    /// reading, or one stream to its end before the other, stalls for good once the child fills
    /// the other pipe (64 KiB) and waits for it to be read. `started` runs once the child runs,
    /// before anything is written or read (a watch that ends it after a deadline, say).
    public func runToEnd(input: Data? = nil, started: (() -> Void)? = nil) throws -> Finished {
        let inPipe: Pipe? = input != nil ? Pipe() : nil
        let outPipe: Pipe? = standardOutput == nil ? Pipe() : nil
        let errPipe: Pipe? = standardError == nil ? Pipe() : nil
        if let inPipe { standardInput = inPipe } else if standardInput == nil { standardInput = FileHandle.nullDevice }
        if let outPipe { standardOutput = outPipe }
        if let errPipe { standardError = errPipe }
        try run()
        started?()
        var output = Data(), errorOutput = Data()
        var pending = input.map { [UInt8]($0) } ?? []
        var written = 0
        var writeFD: Int32 = inPipe?.fileHandleForWriting.fileDescriptor ?? -1
        if writeFD >= 0 {
            if pending.isEmpty {
                try? inPipe?.fileHandleForWriting.close()
                writeFD = -1
            } else {
                _ = fcntl(writeFD, F_SETFL, fcntl(writeFD, F_GETFL) | O_NONBLOCK)
            }
        }
        var readFDs: [Int32: Bool] = [:]  // descriptor: is standard error
        if let outPipe { readFDs[outPipe.fileHandleForReading.fileDescriptor] = false }
        if let errPipe { readFDs[errPipe.fileHandleForReading.fileDescriptor] = true }
        // A child that closed its input early makes the write fail with EPIPE; the SIGPIPE that
        // comes with it is held on this thread and taken back (unless one was pending already),
        // never delivered to the process.
        var pipeSignal = sigset_t(), previousMask = sigset_t(), pendingBefore = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &pipeSignal, &previousMask)
        sigpending(&pendingBefore)
        defer {
            var pendingAfter = sigset_t()
            sigpending(&pendingAfter)
            if sigismember(&pendingAfter, SIGPIPE) == 1, sigismember(&pendingBefore, SIGPIPE) == 0 {
                var zero = timespec()
                _ = sigtimedwait(&pipeSignal, nil, &zero)
            }
            pthread_sigmask(SIG_SETMASK, &previousMask, nil)
        }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while writeFD >= 0 || !readFDs.isEmpty {
            var fds = readFDs.keys.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if writeFD >= 0 { fds.append(pollfd(fd: writeFD, events: Int16(POLLOUT), revents: 0)) }
            guard poll(&fds, nfds_t(fds.count), -1) >= 0 || errno == EINTR else { break }
            for entry in fds where entry.revents != 0 {
                if entry.fd == writeFD {
                    let count = pending.withUnsafeBytes { write(writeFD, $0.baseAddress! + written, $0.count - written) }
                    if count > 0 { written += count }
                    if written == pending.count || (count < 0 && errno != EAGAIN && errno != EINTR) {
                        try? inPipe?.fileHandleForWriting.close()
                        writeFD = -1
                        pending = []
                    }
                    continue
                }
                let count = read(entry.fd, &buffer, buffer.count)
                if count > 0 {
                    if readFDs[entry.fd] == true { errorOutput.append(contentsOf: buffer[0..<count]) } else { output.append(contentsOf: buffer[0..<count]) }
                } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
                    readFDs[entry.fd] = nil
                }
            }
        }
        try? outPipe?.fileHandleForReading.close()
        try? errPipe?.fileHandleForReading.close()
        waitUntilExit()
        return Finished(status: terminationStatus, reason: terminationReason, output: output, errorOutput: errorOutput)
    }
}
