import Foundation
import RISCCore

#if canImport(Glibc)
import Glibc
#endif

/// The standard `process_*` metrics (as Prometheus's client libraries name them), read from
/// `/proc/self` at scrape time: CPU seconds, resident and virtual memory, open and maximum file
/// descriptors, start time.
enum ProcessMetrics {
    static func render() -> String {
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ value: Double?) {
            guard let value else { return }
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(ReceiverMetrics.format(value))\n"
        }
        let ticks = ProcStat.ticks
        let page = Double(sysconf(Int32(_SC_PAGESIZE)))
        // /proc/self/stat: starttime is field 22, vsize 23, rss 24 (man 5 proc).
        let stat = ProcStat(path: "/proc/self/stat")
        func field(_ number: Int) -> Double? { stat?.number(number) }
        metric("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", stat?.cpuSeconds)
        metric("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", field(23))
        metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", field(24).map { $0 * page })
        if let start = field(22), ticks > 0, let boot = ProcStat.bootTime() {
            metric("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", boot + start / ticks)
        }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count).map(Double.init)
        metric("process_open_fds", "gauge", "Number of open file descriptors.", open)
        var limit = rlimit()
        if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            metric("process_max_fds", "gauge", "Maximum number of open file descriptors.", Double(limit.rlim_cur))
        }
        return out
    }
}
