import ArgumentParser
import Logging

/// Flags every command shares.
struct GlobalOptions: ParsableArguments {
    @Option(help: "Diagnostic log level (trace, debug, info, notice, warning, error, critical).")
    var logLevel: Logger.Level = .warning

    /// A logger writing diagnostics to standard error.
    func makeLogger(label: String = "risc") -> Logger {
        var logger = Logger(label: label) { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = logLevel
        return logger
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
