import AuthGateCore
import Foundation
import Testing

@Suite("UTC timestamps on the wire")
struct UTCTimestampTests {
    @Test("format and parse are inverse to the second, across leap years and the epoch; anything but the exact form is nil")
    func roundTrip() {
        for seconds in [0, 951_782_400, 1_800_000_000, 4_102_444_799] {  // 1970, 2000-02-29, 2027, 2099-12-31
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            let text = UTCTimestamp.format(date)
            #expect(text.count == 20 && text.hasSuffix("Z"))
            #expect(UTCTimestamp.parse(text) == date, "\(text)")
        }
        #expect(UTCTimestamp.format(Date(timeIntervalSince1970: 951_782_400.9)) == "2000-02-29T00:00:00Z")
        for bad in ["", "2026-11-25T10:04:12", "2026-11-25T10:04:12.5Z", "2026-13-01T00:00:00Z", "2026-11-25 10:04:12Z", "２026-11-25T10:04:12Z"] {
            #expect(UTCTimestamp.parse(bad) == nil, "\(bad)")
        }
    }

    @Test("an HTTP date (IMF-fixdate) is read to the second; the obsolete forms and anything else are nil")
    func httpDate() {
        #expect(UTCTimestamp.parseHTTPDate("Sun, 06 Nov 1994 08:49:37 GMT") == Date(timeIntervalSince1970: 784_111_777))
        #expect(UTCTimestamp.parseHTTPDate("Tue, 29 Feb 2000 00:00:00 GMT") == Date(timeIntervalSince1970: 951_782_400))
        for bad in [
            "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:49:37 GMT", "", "120",
        ] {
            #expect(UTCTimestamp.parseHTTPDate(bad) == nil, "\(bad)")
        }
    }
}
