import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A bench's processes (receivers, load generators, its throwaway PostgreSQL) weighed by the
/// kernel's scheduler thread by thread, as one group, whatever sessions they run in.
///
/// With the kernel's autogroup on (`kernel.sched_autogroup_enabled = 1`, as on this VM) and the
/// bench in the root CPU cgroup, the scheduler shares the cores between *sessions* first: every
/// PostgreSQL backend calls `setsid()` at its start, so each weighed as much as the bench's whole
/// session (both receivers, their event loops and both load generators together). Two receivers'
/// p99 over 20 ms in 5 of 20 runs that way, median 12.5 ms; with every thread weighed alike, in
/// 6 of 40 in one cgroup and 2 of 20 with autogroup off, median 8.2 and 8.0 (docs/performance.md,
/// 2026-12-01). Inside a CPU cgroup other than the root autogroup does not apply, so `enter()`
/// makes one for the process (`risc-bench-PID` under the cpu controller's root) and moves the
/// process into it; its children, and PostgreSQL's backends forked by them, are born there.
/// Where that is not needed (autogroup off, or already in a cgroup of its own) or not allowed
/// (not root), nothing changes and `summary` says why.
public final class SchedulingScope: Sendable {
    /// What was found and done, for the bench's output.
    public let summary: String
    /// The cgroup made, and the `cgroup.procs` the process goes back to.
    let made: (directory: String, home: String)?
    /// The cgroup the process was moved into; nil if none was made.
    public var directory: String? { made?.directory }

    /// What `enter()` does: nothing (and why), or make a cgroup under the cpu controller's root.
    public enum Plan: Equatable, Sendable {
        case none(String)
        case create(root: String, unified: Bool)
    }

    private init(summary: String, made: (directory: String, home: String)?) {
        self.summary = summary
        self.made = made
    }

    /// The decision from the kernel's files: `autogroup` is `/proc/sys/kernel/sched_autogroup_enabled`
    /// (nil: no such file), `cgroup` is `/proc/self/cgroup`, `mountinfo` is `/proc/self/mountinfo`.
    public static func plan(autogroup: String?, cgroup: String, mountinfo: String) -> Plan {
        guard let autogroup else { return .none("this kernel has no autogroup: every thread is weighed alike already") }
        guard autogroup.trimmingCharacters(in: .whitespacesAndNewlines) != "0" else {
            return .none("autogroup off (kernel.sched_autogroup_enabled = 0): every thread is weighed alike already")
        }
        guard let (path, unified) = cpuCgroup(cgroup) else { return .none("no CPU cgroup in /proc/self/cgroup: left as it is") }
        guard path == "/" else { return .none("in CPU cgroup \(path), where autogroup does not apply: left as it is") }
        guard let root = mountPoint(mountinfo, unified: unified) else {
            return .none("autogroup on, but no \(unified ? "cgroup2" : "cgroup cpu") mount to make a group in: PostgreSQL's backends each weigh as much as the bench")
        }
        return .create(root: root, unified: unified)
    }

    /// The CPU cgroup's path in a `/proc/PID/cgroup` text: the v1 line whose controllers include
    /// `cpu`, else the unified hierarchy's (`0::path`).
    static func cpuCgroup(_ text: String) -> (path: String, unified: Bool)? {
        var unified: String?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            if fields[1].split(separator: ",").contains("cpu") { return (String(fields[2]), false) }
            if fields[0] == "0" && fields[1].isEmpty { unified = String(fields[2]) }
        }
        return unified.map { ($0, true) }
    }

    /// Where the cpu controller's hierarchy (v1) or the unified one is mounted, at its root.
    static func mountPoint(_ mountinfo: String, unified: Bool) -> String? {
        for line in mountinfo.split(separator: "\n") {
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2 else { continue }
            let mount = halves[0].split(separator: " "), filesystem = halves[1].split(separator: " ")
            guard mount.count >= 5, filesystem.count >= 3, mount[3] == "/" else { continue }
            if unified ? filesystem[0] == "cgroup2" : filesystem[0] == "cgroup" && filesystem[2].split(separator: ",").contains("cpu") {
                return String(mount[4])
            }
        }
        return nil
    }

    /// The kernel's autogroup setting: nil when this kernel has none.
    static var autogroupSetting: String? { try? String(contentsOfFile: "/proc/sys/kernel/sched_autogroup_enabled", encoding: .utf8) }

    /// `plan(autogroup:cgroup:mountinfo:)` from this process's files, as `enter()` decides.
    public static func currentPlan() -> Plan {
        plan(
            autogroup: autogroupSetting, cgroup: (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)) ?? "",
            mountinfo: (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? "")
    }

    /// Moves this process into a CPU cgroup of its own when autogroup would otherwise weigh each
    /// session alike (see the type); `leave()` moves it back.
    public static func enter() -> SchedulingScope {
        let root: String, unified: Bool
        switch currentPlan() {
        case .none(let why): return SchedulingScope(summary: why, made: nil)
        case .create(let found, let isUnified): (root, unified) = (found, isUnified)
        }
        if unified {
            let controllers = (try? String(contentsOfFile: root + "/cgroup.subtree_control", encoding: .utf8)) ?? ""
            guard controllers.split(whereSeparator: \.isWhitespace).contains("cpu") else {
                return SchedulingScope(summary: "autogroup on, and the cpu controller is not enabled under \(root): PostgreSQL's backends each weigh as much as the bench", made: nil)
            }
        }
        removeStale(in: root)
        let directory = root + "/risc-bench-\(getpid())"
        guard mkdir(directory, 0o755) == 0 || errno == EEXIST else {
            return SchedulingScope(summary: "autogroup on, and \(directory) could not be made (\(String(cString: strerror(errno)))): PostgreSQL's backends each weigh as much as the bench", made: nil)
        }
        guard write("\(getpid())", to: directory + "/cgroup.procs") else {
            let reason = String(cString: strerror(errno))
            rmdir(directory)
            return SchedulingScope(summary: "autogroup on, and this process could not move to \(directory) (\(reason)): PostgreSQL's backends each weigh as much as the bench", made: nil)
        }
        return SchedulingScope(
            summary:
                "autogroup on: the bench runs in CPU cgroup \(directory), where its receivers, load generators and PostgreSQL's backends are weighed thread by thread (each backend's own session would weigh as much as the whole bench)",
            made: (directory, root + "/cgroup.procs"))
    }

    /// Moves the process back where it was, with any child still in the cgroup (a test's scope
    /// also holds what other tests of the process started meanwhile: CI left one such cgroup),
    /// and removes the cgroup (else the next bench's `enter()` does, once it is empty).
    public func leave() {
        guard let made else { return }
        // Again while a member forks or exits under the move (rmdir fails while any is there).
        for _ in 0..<20 {
            let members = (try? String(contentsOfFile: made.directory + "/cgroup.procs", encoding: .utf8)) ?? ""
            for pid in Set(members.split(separator: "\n").map(String.init) + ["\(getpid())"]) { _ = Self.write(pid, to: made.home) }
            if rmdir(made.directory) == 0 || errno == ENOENT { return }
            usleep(10_000)
        }
    }

    /// The scheduling group a process is weighed in: its CPU cgroup, or in the root one with
    /// autogroup on, its autogroup (`/proc/PID/autogroup`). Nil if the process is gone.
    /// `autogroup`: whether autogroup is on (read from the kernel when not given).
    public static func group(of pid: Int32, autogroup: Bool? = nil) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8), let (path, _) = cpuCgroup(text) else { return nil }
        guard path == "/" && (autogroup ?? autogroupSetting?.hasPrefix("1") ?? false) else { return "cgroup \(path)" }
        guard let own = try? String(contentsOfFile: "/proc/\(pid)/autogroup", encoding: .utf8) else { return nil }
        return String(own.split(separator: " ").first ?? "")
    }

    /// Cgroups of benches that ended without `leave()` (killed): removed once empty.
    private static func removeStale(in root: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] where name.hasPrefix("risc-bench-") {
            guard let pid = Int32(name.dropFirst("risc-bench-".count)), kill(pid, 0) != 0 && errno == ESRCH else { continue }
            rmdir(root + "/" + name)
        }
    }

    private static func write(_ text: String, to path: String) -> Bool {
        let descriptor = open(path, O_WRONLY)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        return Glibc.write(descriptor, bytes, bytes.count) == bytes.count
    }
}
