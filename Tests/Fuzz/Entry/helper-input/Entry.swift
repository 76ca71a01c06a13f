import AuthGateFuzzing
import CLinux

/// The fuzz target `helper-input` (scripts/fuzz helper-input): libFuzzer's entry point.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzTarget.helperInput.run(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

/// SwiftPM links an executable's `main` to `<module>_main`: this one hands libFuzzer's loop
/// the entry point above.
@_cdecl("fuzz_helper_input_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) }
}
