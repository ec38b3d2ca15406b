import Foundation

/// `risc log verify` whole: the chain across the log's files, then the log against its newest
/// signed checkpoint and, when given, one kept elsewhere (an auditor's copy, or one sent off the
/// box as it was made). The chain shows edits, removals and reordering; a checkpoint shows lines
/// cut from the end and a log rewritten and chained again, up to its size.
public struct EventLogAudit: Sendable {
    /// What the audit decided: `risc log verify`'s exit status 0, 1 or 2.
    public enum Result: String, Sendable {
        case verified, tampered, undecided
    }

    /// Why a checkpoint does not match the log.
    public enum CheckpointReason: String, Sendable {
        /// The note's signature does not verify with the key, or the note is not a checkpoint of this log.
        case checkpointInvalid = "checkpoint_invalid"
        /// The log has fewer lines than a checkpoint was signed for.
        case truncated
        /// The log's tree at the checkpoint's size is not the one signed.
        case rootMismatch = "root_mismatch"
        /// The log's own newest checkpoint is older than one kept elsewhere: put back after a rewrite.
        case rollback
    }

    public var result: Result
    public var summary: EventLogVerifier.Summary
    /// Why the log is tampered with, when it is not the chain (that is `summary.problem`).
    public var checkpointProblem: (reason: CheckpointReason, detail: String)?
    /// The newest checkpoint that verified.
    public var checkpoint: EventLogCheckpoint?
    /// Lines written after the newest checkpoint (a warning: not sealed yet).
    public var unsealed: UInt64 = 0
    /// Why the audit cannot decide (no key, no checkpoint).
    public var undecidedBecause: String?

    /// Audits `files` (oldest first). `checkpointNote`: the log's newest checkpoint (its
    /// `events.checkpoint`); `trustedNote`: one kept elsewhere; `key`: the verifier key both must
    /// be signed with.
    public static func run(files: [String], key: CheckpointVerifier?, checkpointNote: String?, trustedNote: String?) throws -> EventLogAudit {
        try run(key: key, checkpointNote: checkpointNote, trustedNote: trustedNote) { try EventLogVerifier.verify(files: files, rootsAt: $0) }
    }

    /// Audits the log at `path` with its segments and their digests (`EventLogSegments.verify`)
    /// or, without segments, its logrotate files.
    public static func run(path: String, key: CheckpointVerifier?, checkpointNote: String?, trustedNote: String?) throws -> EventLogAudit {
        try run(key: key, checkpointNote: checkpointNote, trustedNote: trustedNote) { try EventLogSegments.verify(path, key: key, rootsAt: $0) }
    }

    private static func run(
        key: CheckpointVerifier?, checkpointNote: String?, trustedNote: String?, verify: (Set<UInt64>) throws -> EventLogVerifier.Summary
    ) throws -> EventLogAudit {
        var checkpoints: [(name: String, checkpoint: EventLogCheckpoint)] = []
        var problem: (CheckpointReason, String)?
        if let key {
            for (name, note) in [("the log's checkpoint", checkpointNote), ("the trusted checkpoint", trustedNote)] {
                guard let note else { continue }
                do {
                    checkpoints.append((name, try EventLogCheckpoint.verify(note: note, key: key)))
                } catch {
                    problem = problem ?? (.checkpointInvalid, "\(name): \(error)")
                }
            }
        }
        let summary = try verify(Set(checkpoints.map(\.checkpoint.size)))
        var audit = EventLogAudit(result: .undecided, summary: summary)
        if summary.problem != nil {
            audit.result = .tampered
            return audit
        }
        let origin = summary.logID.map { "risc-event-log/" + $0 }
        for (name, checkpoint) in checkpoints where problem == nil {
            let size = summary.tree?.size ?? 0
            if let origin, checkpoint.origin != origin {
                problem = (.checkpointInvalid, "\(name) is of \(checkpoint.origin), not of this log (\(origin))")
            } else if summary.tree == nil {
                audit.undecidedBecause = "the log's files do not start at its genesis, so its tree cannot be computed"
            } else if checkpoint.size < size - UInt64(summary.lines) && summary.roots[checkpoint.size] == nil {
                audit.undecidedBecause = "\(name) signed \(checkpoint.size) lines, in segments retention has deleted"
            } else if checkpoint.size > size {
                problem = (.truncated, "\(name) was signed for \(checkpoint.size) lines; the log has \(size)")
            } else if summary.roots[checkpoint.size] != checkpoint.root {
                problem = (.rootMismatch, "the log's first \(checkpoint.size) lines are not those \(name) signed")
            }
        }
        if problem == nil, checkpoints.count == 2, checkpoints[1].checkpoint.size > checkpoints[0].checkpoint.size {
            problem = (.rollback, "the log's checkpoint (\(checkpoints[0].checkpoint.size) lines) is older than the trusted one (\(checkpoints[1].checkpoint.size))")
        }
        if let problem {
            audit.result = .tampered
            audit.checkpointProblem = problem
            return audit
        }
        if audit.undecidedBecause != nil { return audit }
        guard key != nil else {
            audit.undecidedBecause = "no verifier key (--key): checkpoints cannot be checked"
            return audit
        }
        guard let newest = checkpoints.map(\.checkpoint).max(by: { $0.size < $1.size }) else {
            audit.undecidedBecause = "no checkpoint yet: lines cut from the end would not show"
            return audit
        }
        audit.checkpoint = newest
        audit.unsealed = (summary.tree?.size ?? 0) - newest.size
        audit.result = .verified
        return audit
    }
}
