import ArgumentParser

extension RiscCommand {
    struct Bench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Benchmarks that print their figures.",
            subcommands: [VerifyBench.self, ServeBench.self, ActionsBench.self, RetentionBench.self]
        )
    }
}
