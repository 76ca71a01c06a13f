import AuthGateFuzzing
import CLinux

#if canImport(Glibc)
import Glibc
#endif

/// `AUTHGATE_FUZZ_TARGET=TARGET authgate-fuzz [libFuzzer options] [corpus directories]`
/// (scripts/fuzz): libFuzzer's loop on one ``FuzzTarget``. One executable for every target, so
/// that building them costs one link.
private let target: FuzzTarget = {
    let name = getenv("AUTHGATE_FUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        print("authgate-fuzz: set AUTHGATE_FUZZ_TARGET to one of: " + FuzzTarget.allCases.map(\.rawValue).joined(separator: " "))
        exit(64)
    }
    return target
}()

/// libFuzzer's entry point, called for every input.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    target.run(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

/// Before the loop: an unknown target stops here, not at the first input.
@_cdecl("LLVMFuzzerInitialize")
func fuzzInitialize(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32 {
    _ = target
    return 0
}

/// SwiftPM makes an executable's `main` the symbol `<module>_main`: this one runs libFuzzer's
/// loop on the entry points above.
@_cdecl("authgate_fuzz_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) }
}
