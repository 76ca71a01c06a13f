/// A QR code (ISO/IEC 18004) of a short text, for showing `verification_uri_complete` in a
/// terminal. Byte mode, error correction level L, versions 1–10 (up to 271 bytes), the mask
/// chosen by the standard's penalty rules. No package on this project's machines offers one,
/// hence these few lines.
package struct QRCode {
    /// `modules[y][x]`: true for dark.
    package private(set) var modules: [[Bool]]
    private var isFunction: [[Bool]]
    package let version: Int
    package var size: Int { version * 4 + 17 }

    /// (data codewords per block, blocks) for each version at level L, and EC codewords per block.
    private static let blocks: [(groups: [(count: Int, data: Int)], ec: Int)] = [
        ([(1, 19)], 7), ([(1, 34)], 10), ([(1, 55)], 15), ([(1, 80)], 20), ([(1, 108)], 26),
        ([(2, 68)], 18), ([(2, 78)], 20), ([(2, 97)], 24), ([(2, 116)], 30), ([(2, 68), (2, 69)], 18),
    ]

    private static let alignment: [[Int]] = [
        [], [6, 18], [6, 22], [6, 26], [6, 30], [6, 34], [6, 22, 38], [6, 24, 42], [6, 26, 46], [6, 28, 50],
    ]

    /// `nil` when the text is too long for version 10.
    package init?(text: String) {
        let bytes = Array(text.utf8)
        var chosen: Int?
        for version in 1...10 {
            let capacity = Self.blocks[version - 1].groups.reduce(0) { $0 + $1.count * $1.data }
            let countBits = version < 10 ? 8 : 16
            if 4 + countBits + bytes.count * 8 <= capacity * 8 {
                chosen = version
                break
            }
        }
        guard let version = chosen else { return nil }
        self.version = version
        let size = version * 4 + 17
        modules = Array(repeating: Array(repeating: false, count: size), count: size)
        isFunction = modules
        drawFunctionPatterns()
        let codewords = Self.codewords(bytes, version: version)
        drawCodewords(codewords)
        var best = 0
        var bestPenalty = Int.max
        for mask in 0..<8 {
            applyMask(mask)
            drawFormatBits(mask)
            let penalty = self.penalty()
            if penalty < bestPenalty {
                best = mask
                bestPenalty = penalty
            }
            applyMask(mask)  // XOR again: undone
        }
        applyMask(best)
        drawFormatBits(best)
    }

    // MARK: Data

    private static func codewords(_ bytes: [UInt8], version: Int) -> [UInt8] {
        let layout = blocks[version - 1]
        let capacity = layout.groups.reduce(0) { $0 + $1.count * $1.data }
        var bits: [Bool] = []
        func append(_ value: Int, _ count: Int) {
            for index in stride(from: count - 1, through: 0, by: -1) { bits.append((value >> index) & 1 == 1) }
        }
        append(0b0100, 4)
        append(bytes.count, version < 10 ? 8 : 16)
        for byte in bytes { append(Int(byte), 8) }
        append(0, min(4, capacity * 8 - bits.count))
        while bits.count % 8 != 0 { bits.append(false) }
        var data: [UInt8] = stride(from: 0, to: bits.count, by: 8).map { start in
            bits[start..<start + 8].reduce(UInt8(0)) { $0 << 1 | ($1 ? 1 : 0) }
        }
        var pad: UInt8 = 0xEC
        while data.count < capacity {
            data.append(pad)
            pad = pad == 0xEC ? 0x11 : 0xEC
        }
        // Split into blocks, add each block's Reed-Solomon codewords, interleave.
        var dataBlocks: [[UInt8]] = []
        var offset = 0
        for group in layout.groups {
            for _ in 0..<group.count {
                dataBlocks.append(Array(data[offset..<offset + group.data]))
                offset += group.data
            }
        }
        let generator = ReedSolomon.generator(degree: layout.ec)
        let ecBlocks = dataBlocks.map { ReedSolomon.remainder($0, generator: generator) }
        var result: [UInt8] = []
        for index in 0..<(dataBlocks.map(\.count).max() ?? 0) {
            for block in dataBlocks where index < block.count { result.append(block[index]) }
        }
        for index in 0..<layout.ec {
            for block in ecBlocks { result.append(block[index]) }
        }
        return result
    }

    // MARK: Function patterns

    private mutating func set(_ x: Int, _ y: Int, _ dark: Bool) {
        modules[y][x] = dark
        isFunction[y][x] = true
    }

    private mutating func drawFunctionPatterns() {
        for index in 0..<size {
            set(6, index, index % 2 == 0)
            set(index, 6, index % 2 == 0)
        }
        drawFinder(3, 3)
        drawFinder(size - 4, 3)
        drawFinder(3, size - 4)
        let positions = Self.alignment[version - 1]
        for (i, a) in positions.enumerated() {
            for (j, b) in positions.enumerated() {
                let corner = (i == 0 && j == 0) || (i == 0 && j == positions.count - 1) || (i == positions.count - 1 && j == 0)
                if !corner { drawAlignment(a, b) }
            }
        }
        drawFormatBits(0)  // reserves the areas; redrawn with the real mask
        drawVersion()
    }

    private mutating func drawFinder(_ cx: Int, _ cy: Int) {
        for dy in -4...4 {
            for dx in -4...4 {
                let x = cx + dx
                let y = cy + dy
                guard (0..<size).contains(x), (0..<size).contains(y) else { continue }
                let distance = max(abs(dx), abs(dy))
                set(x, y, distance != 2 && distance != 4)
            }
        }
    }

    private mutating func drawAlignment(_ cx: Int, _ cy: Int) {
        for dy in -2...2 {
            for dx in -2...2 { set(cx + dx, cy + dy, max(abs(dx), abs(dy)) != 1) }
        }
    }

    /// Level L is 01; BCH(15,5) with 0x537, masked with 0x5412.
    private mutating func drawFormatBits(_ mask: Int) {
        let data = 0b01 << 3 | mask
        var remainder = data
        for _ in 0..<10 { remainder = (remainder << 1) ^ ((remainder >> 9) * 0x537) }
        let bits = (data << 10 | remainder) ^ 0x5412
        func bit(_ i: Int) -> Bool { (bits >> i) & 1 == 1 }
        for i in 0...5 { set(8, i, bit(i)) }
        set(8, 7, bit(6))
        set(8, 8, bit(7))
        set(7, 8, bit(8))
        for i in 9..<15 { set(14 - i, 8, bit(i)) }
        for i in 0..<8 { set(size - 1 - i, 8, bit(i)) }
        for i in 8..<15 { set(8, size - 15 + i, bit(i)) }
        set(8, size - 8, true)  // the dark module
    }

    /// Versions 7 and up: BCH(18,6) with 0x1F25.
    private mutating func drawVersion() {
        guard version >= 7 else { return }
        var remainder = version
        for _ in 0..<12 { remainder = (remainder << 1) ^ ((remainder >> 11) * 0x1F25) }
        let bits = version << 12 | remainder
        for i in 0..<18 {
            let dark = (bits >> i) & 1 == 1
            let a = size - 11 + i % 3
            let b = i / 3
            set(a, b, dark)
            set(b, a, dark)
        }
    }

    // MARK: Data placement and masking

    private mutating func drawCodewords(_ codewords: [UInt8]) {
        var index = 0
        var right = size - 1
        while right >= 1 {
            if right == 6 { right = 5 }
            for vertical in 0..<size {
                for j in 0..<2 {
                    let x = right - j
                    let upward = (right + 1) & 2 == 0
                    let y = upward ? size - 1 - vertical : vertical
                    guard !isFunction[y][x] else { continue }
                    if index < codewords.count * 8 {
                        modules[y][x] = (codewords[index >> 3] >> (7 - index & 7)) & 1 == 1
                        index += 1
                    }
                }
            }
            right -= 2
        }
    }

    private mutating func applyMask(_ mask: Int) {
        for y in 0..<size {
            for x in 0..<size where !isFunction[y][x] {
                let invert =
                    switch mask {
                    case 0: (x + y) % 2 == 0
                    case 1: y % 2 == 0
                    case 2: x % 3 == 0
                    case 3: (x + y) % 3 == 0
                    case 4: (x / 3 + y / 2) % 2 == 0
                    case 5: x * y % 2 + x * y % 3 == 0
                    case 6: (x * y % 2 + x * y % 3) % 2 == 0
                    default: ((x + y) % 2 + x * y % 3) % 2 == 0
                    }
                if invert { modules[y][x].toggle() }
            }
        }
    }

    /// The penalty score of ISO/IEC 18004 §7.8.3: runs, 2×2 blocks, finder look-alikes, balance.
    private func penalty() -> Int {
        var score = 0
        func lines(_ vertical: Bool) -> [[Bool]] {
            vertical ? (0..<size).map { x in (0..<size).map { y in modules[y][x] } } : modules
        }
        for line in lines(false) + lines(true) {
            var run = 1
            for i in 1..<size {
                if line[i] == line[i - 1] {
                    run += 1
                } else {
                    if run >= 5 { score += run - 2 }
                    run = 1
                }
            }
            if run >= 5 { score += run - 2 }
            let pattern: [Bool] = [true, false, true, true, true, false, true]
            for i in 0...(size - 7) where Array(line[i..<i + 7]) == pattern {
                let before = i >= 4 && line[(i - 4)..<i].allSatisfy { !$0 }
                let after = i + 11 <= size && line[(i + 7)..<(i + 11)].allSatisfy { !$0 }
                if before || after { score += 40 }
            }
        }
        for y in 0..<(size - 1) {
            for x in 0..<(size - 1) {
                let c = modules[y][x]
                if c == modules[y][x + 1], c == modules[y + 1][x], c == modules[y + 1][x + 1] { score += 3 }
            }
        }
        let dark = modules.reduce(0) { $0 + $1.filter { $0 }.count }
        let total = size * size
        // 10 points for each full 5 % step the dark share is away from 50 %.
        score += max(0, (abs(dark * 20 - total * 10) + total - 1) / total - 1) * 10
        return score
    }

    // MARK: Rendering

    /// Two rows of modules per line with half blocks, black on white whatever the terminal's
    /// colours, inside the standard's quiet zone (4 modules; 2 here, which readers accept).
    package func terminalRendering(quietZone: Int = 2) -> String {
        let total = size + 2 * quietZone
        func dark(_ x: Int, _ y: Int) -> Bool {
            let mx = x - quietZone
            let my = y - quietZone
            guard (0..<size).contains(mx), (0..<size).contains(my) else { return false }
            return modules[my][mx]
        }
        var lines: [String] = []
        for y in stride(from: 0, to: total, by: 2) {
            var line = "\u{1B}[30;47m"
            for x in 0..<total {
                switch (dark(x, y), y + 1 < total && dark(x, y + 1)) {
                case (true, true): line += "█"
                case (true, false): line += "▀"
                case (false, true): line += "▄"
                case (false, false): line += " "
                }
            }
            lines.append(line + "\u{1B}[0m")
        }
        return lines.joined(separator: "\n")
    }
}

/// Reed-Solomon over GF(256) with the QR polynomial x⁸+x⁴+x³+x²+1 (0x11D).
private enum ReedSolomon {
    static func multiply(_ a: UInt8, _ b: UInt8) -> UInt8 {
        var result = 0
        for i in stride(from: 7, through: 0, by: -1) {
            result = (result << 1) ^ ((result >> 7) * 0x11D)
            result ^= ((Int(b) >> i) & 1) * Int(a)
        }
        return UInt8(result & 0xFF)
    }

    /// The generator polynomial's coefficients (highest first, the leading 1 left out).
    static func generator(degree: Int) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: degree)
        result[degree - 1] = 1
        var root: UInt8 = 1
        for _ in 0..<degree {
            for j in 0..<degree {
                result[j] = multiply(result[j], root)
                if j + 1 < degree { result[j] ^= result[j + 1] }
            }
            root = multiply(root, 0x02)
        }
        return result
    }

    static func remainder(_ data: [UInt8], generator: [UInt8]) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: generator.count)
        for byte in data {
            let factor = byte ^ result.removeFirst()
            result.append(0)
            for i in 0..<result.count { result[i] ^= multiply(generator[i], factor) }
        }
        return result
    }
}
