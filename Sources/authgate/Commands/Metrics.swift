import ArgumentParser
import AuthGateRPC
import AuthGateTools

struct Metrics: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the daemon's metrics in Prometheus's text format (administrators).",
        discussion: "The same text `authgated --metrics-listen` serves on GET /metrics; for a one-off look or a textfile collector."
    )

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let result = try global.daemon.call(.metrics, EmptyResult(), as: MetricsResult.self)
        if global.json { return try global.printJSON(result) }
        print(result.text, terminator: "")
    }
}
