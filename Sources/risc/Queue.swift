public import ArgumentParser
import Foundation
import RISCConfig
import RISCCore

extension RiscCommand {
    struct Queue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Inspect and steer the queue of received SETs (pending, retries, dead letters).",
            subcommands: [Status.self, List.self, Show.self, Retry.self, Purge.self]
        )
    }
}

extension RiscCommand.Queue {
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Counts: pending, scheduled retries, done, dead.")
        @OptionGroup var data: StoreOption
        func run() async throws {
            let store = try await data.open()
            defer { store.close() }
            print(JSONValue.object(try await store.queue().counts(now: systemNow()).json).prettyPrinted)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The newest SETs, optionally of one state.")
        @Flag(help: "Only dead letters.") var dead = false
        @Option(help: "Only this state (pending, done, dead).") var state: QueueState?
        @Option(parsing: .unconditional, help: "How many (1 or more).") var limit: Int = 50
        @OptionGroup var data: StoreOption
        func validate() throws {
            // Before: `--limit -1` read as a missing value, `--limit=-1` listed every SET of an
            // embedded store and failed on PostgreSQL with its driver's generic error.
            try OptionRange.atLeast(1, limit, "--limit")
        }
        func run() async throws {
            let store = try await data.open()
            defer { store.close() }
            for row in try await store.queue().list(state: dead ? .dead : state, limit: limit) {
                print(JSONValue.object(row.json).serialized)
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "One SET by jti, with the actions applied.")
        @Argument var jti: String
        @OptionGroup var data: StoreOption
        func run() async throws {
            let store = try await data.open()
            defer { store.close() }
            guard let row = try await store.queue().show(jti: jti) else {
                FileHandle.standardError.write(Data("risc: no SET with jti \(jti)\n".utf8))
                throw ExitStatus.rejected
            }
            print(JSONValue.object(row.json).prettyPrinted)
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Requeue one SET now (by jti), or every dead letter with --dead.")
        @Argument var jti: String?
        @Flag(help: "Requeue every dead letter.") var dead = false
        @OptionGroup var data: StoreOption
        func validate() throws {
            guard (jti == nil) != !dead else { throw ValidationError("give a jti or --dead") }
        }
        func run() async throws {
            let store = try await data.open()
            defer { store.close() }
            let queue = try store.queue()
            let count = try await queue.retry(jti: dead ? nil : jti)
            // One jti and nothing requeued: say why rather than look as if it worked.
            if let jti, !dead, count == 0 {
                let row = try await queue.show(jti: jti), shown = Printable.safe(jti, maxBytes: 200)
                let why =
                    row == nil
                    ? "no SET with jti \(shown)"
                    : "\(shown) is done (its actions were applied): nothing to requeue; to apply it again: risc replay --from-store --local --jti \(shown)"
                FileHandle.standardError.write(Data("risc: \(why)\n".utf8))
                throw ExitStatus.rejected
            }
            print("requeued \(count)")
        }
    }

    struct Purge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete dead letters older than a duration (30d, 12h, 90m, 3600s).")
        @Flag(help: "Purge dead letters (required).") var dead = false
        @Option(help: "Age, e.g. 30d.") var olderThan: String
        @OptionGroup var data: StoreOption
        func validate() throws {
            guard dead else { throw ValidationError("only dead letters can be purged: add --dead") }
            if let problem = durationProblem(olderThan) { throw ValidationError("--older-than: \(problem)") }
        }
        func run() async throws {
            let store = try await data.open()
            defer { store.close() }
            let count = try await store.queue().purgeDead(olderThan: Self.seconds(olderThan)!, now: systemNow())
            print("purged \(count)")
        }
        static func seconds(_ text: String) -> Double? { durationSeconds(text) }
    }
}

extension QueueState: ExpressibleByArgument {}
