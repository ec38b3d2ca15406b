import Foundation
public import RISCClient
public import RISCCore

extension BlockingPool {
    /// The threads tests wait for their child processes on (`risc` commands, `psql`, `pg_ctl`,
    /// `Process.exited()`). Swift concurrency has as many threads as cores (two here) for every
    /// test, receiver and client in the test process; a test waiting for a child on one of them
    /// (a `pg_ctl stop`, a `risc bench` run) on each froze every receiver until its clients'
    /// requests timed out.
    public static let waits = BlockingPool(name: "test.waits", maximumThreads: 64)
}

extension ChildProcess {
    /// Waits for the process to end, on `BlockingPool.waits`' threads, not on one of Swift
    /// concurrency's; one still running after `seconds` is killed (SIGKILL), so a test whose
    /// child hangs fails on its exit status instead of holding the suite.
    public func exited(within seconds: Double = 600) async {
        await stop(signal: nil, within: seconds)
    }
}

extension CurlHTTPClient {
    /// A client for tests: a request that names no time limit waits up to a minute (half a minute
    /// to connect and finish a TLS handshake). A receiver in
    /// the test process answers on the same two cores as every other test (RSA keys generated,
    /// vectors checked, clusters started), so an answer can come late without being wrong; curl's
    /// 10 s made such a test fail now and then.
    public static func patient(caBundlePath: String? = nil) -> CurlHTTPClient {
        CurlHTTPClient(caBundlePath: caBundlePath, defaultTimeout: 60, defaultConnectTimeout: 30)
    }
}
