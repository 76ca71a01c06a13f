import AuthGateCore
import Crypto
import FoundationEssentials

/// The sessions file format, without the file: `AGS1`, then AES-GCM (nonce, ciphertext, tag)
/// over a JSON envelope `{version, uid, sessions}`, authenticated with the uid so that a file
/// renamed onto another uid's name does not open. ``SessionStore`` reads and writes the files.
enum SealedSessionsFile {
    static let magic: [UInt8] = Array("AGS1".utf8)
    static let formatVersion = 1
    /// Files larger than this are refused when loading, and never written.
    static let maximumFileSize = 16 * 1024 * 1024

    /// The JSON inside the encryption.
    private struct Envelope: Codable {
        var version: Int
        var uid: UInt32
        var sessions: [PersistedSession]
    }

    /// Read first, so a future version is reported as such rather than as a decoding failure.
    private struct VersionProbe: Decodable {
        var version: Int
    }

    /// Binds a file to its uid: opening it under another uid's name fails authentication.
    private static func authenticatedData(uid: UInt32) -> Data {
        Data("authgate sessions v1 uid=\(uid)".utf8)
    }

    /// The whole file for `uid`'s sessions, sealed with `key`; `file` names it in errors.
    static func seal(_ sessions: [PersistedSession], uid: UInt32, key: StorageKey, file: String) throws(StorageError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys]
        let bytes: [UInt8]
        do {
            let plaintext = try encoder.encode(Envelope(version: Self.formatVersion, uid: uid, sessions: sessions))
            bytes = try fileContents(sealing: plaintext, uid: uid, key: key)
        } catch {
            throw StorageError(file: file, "cannot encrypt the sessions of uid \(uid) for \(file)")
        }
        guard bytes.count <= Self.maximumFileSize else {
            throw StorageError(file: file, "the sessions of uid \(uid) would make \(file) larger than 16 MiB; not saved")
        }
        return bytes
    }

    /// A file's bytes: the magic, then `plaintext` sealed for `uid`. Separate from `seal` so
    /// tests can make validly encrypted files with invalid contents.
    static func fileContents(sealing plaintext: Data, uid: UInt32, key: StorageKey) throws -> [UInt8] {
        let box = try AES.GCM.seal(plaintext, using: key.symmetricKey, authenticating: authenticatedData(uid: uid))
        // `combined` is only nil for nonces of a non-standard size; seal uses 12 bytes.
        guard let combined = box.combined else { throw CryptoKitError.incorrectParameterSize }
        return magic + Array(combined)
    }

    /// The file format, without the file: a sealed file's bytes opened for `uid` with `key`.
    /// Any bytes give the sessions or a sentence naming `file`, never a trap (fuzzed:
    /// `scripts/fuzz session-file`).
    static func open(_ bytes: [UInt8], uid: UInt32, key: StorageKey, file: String) -> Result<[PersistedSession], StoreFailure> {
        // Magic, nonce and tag; an empty list is never written, so anything this short is damaged.
        guard bytes.count >= Self.magic.count + 12 + 16 else {
            return .failure(StoreFailure("\(file) is too short to be a sessions file (\(bytes.count) bytes)"))
        }
        guard bytes.starts(with: Self.magic) else {
            return .failure(StoreFailure("\(file) is not an authgate sessions file (it does not start with AGS1)"))
        }
        let plaintext: Data
        do {
            let box = try AES.GCM.SealedBox(combined: bytes[Self.magic.count...])
            plaintext = try AES.GCM.open(box, using: key.symmetricKey, authenticating: authenticatedData(uid: uid))
        } catch {
            return .failure(
                StoreFailure(
                    "\(file) cannot be decrypted: it was written with another key, was damaged, "
                        + "or belongs to another uid"
                )
            )
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        do {
            let version = try decoder.decode(VersionProbe.self, from: plaintext).version
            guard version == Self.formatVersion else {
                return .failure(StoreFailure("\(file) is in format version \(version), which this authgate cannot read"))
            }
            let envelope = try decoder.decode(Envelope.self, from: plaintext)
            guard envelope.uid == uid else {
                return .failure(StoreFailure("\(file) holds the sessions of uid \(envelope.uid), not of uid \(uid)"))
            }
            return .success(envelope.sessions)
        } catch let error as DecodingError {
            // Only the coding path: the decoder's own messages may quote values, which could be tokens.
            return .failure(StoreFailure("\(file) decrypted, but its contents are not a valid sessions list (at \(Self.codingPath(error)))"))
        } catch {
            return .failure(StoreFailure("\(file) decrypted, but its contents are not a valid sessions list"))
        }
    }

    /// Where in the JSON decoding failed, as `sessions.0.grant`; keys only, never values.
    private static func codingPath(_ error: DecodingError) -> String {
        let context: DecodingError.Context
        switch error {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .dataCorrupted(let c): context = c
        case .keyNotFound(let key, let c):
            return (c.codingPath + [key]).map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        @unknown default: return "an unknown place"
        }
        let path = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        return path.isEmpty ? "the top level" : path
    }
}
