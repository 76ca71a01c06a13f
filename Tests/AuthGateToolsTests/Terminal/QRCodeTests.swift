import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("The QR code of a sign-in page")
struct QRCodeTests {
    @Test("its version fits the text; finder and timing patterns where ISO/IEC 18004 puts them")
    func structure() throws {
        let short = try #require(QRCode(text: "https://id.example.com/device?user_code=WDJB-MJHT"))
        #expect(short.size == short.version * 4 + 17 && short.modules.count == short.size)
        let long = try #require(QRCode(text: String(repeating: "x", count: 200)))
        #expect(long.version > short.version)
        #expect(QRCode(text: String(repeating: "x", count: 400)) == nil, "past version 10")
        let modules = short.modules
        let size = short.size
        for (x0, y0) in [(0, 0), (size - 7, 0), (0, size - 7)] {
            for y in 0..<7 {
                for x in 0..<7 {
                    let ring = max(abs(x - 3), abs(y - 3))
                    #expect(modules[y0 + y][x0 + x] == (ring != 2), "finder at (\(x0), \(y0))")
                }
            }
        }
        for index in 8..<(size - 8) {
            #expect(modules[6][index] == index.isMultiple(of: 2) && modules[index][6] == index.isMultiple(of: 2), "timing at \(index)")
        }
        let rendering = short.terminalRendering()
        #expect(rendering.split(separator: "\n").count == (size + 4 + 1) / 2)
    }
}
