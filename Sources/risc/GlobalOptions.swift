public import ArgumentParser
import Logging
import RISCConfig
import RISCServer

/// Flags every command shares.
struct GlobalOptions: ParsableArguments {
    @Option(help: "Diagnostic log level: trace, debug, info, notice, warning, error, critical (serve: default log.level, else notice; other commands: warning).")
    var logLevel: Logger.Level?

    @Option(help: "Diagnostic log format: text or json (one JSON object per line; serve: default log.format, else text).")
    var logFormat: DiagnosticLogFormat?

    /// A logger writing diagnostics to standard error; the flags win over `level` and `format`.
    func makeLogger(label: String = "risc", level: Logger.Level = .warning, format: DiagnosticLogFormat = .text) -> Logger {
        makeLogger(label: label, level: LogLevelSetting(logLevel ?? level), format: format)
    }

    /// A logger whose level is `level`'s, which the caller may change later (serve's SIGHUP).
    func makeLogger(label: String = "risc", level: LogLevelSetting, format: DiagnosticLogFormat = .text) -> Logger {
        let format = logFormat ?? format
        return Logger(label: label) { DiagnosticLogHandler(label: $0, level: level, format: format) }
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
extension DiagnosticLogFormat: ExpressibleByArgument {}
extension ConfigFile.Format: ExpressibleByArgument {}
