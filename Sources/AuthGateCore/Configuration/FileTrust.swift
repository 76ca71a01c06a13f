public import Foundation

/// sshd's `StrictModes` for the files the daemon trusts: provider files and their directory,
/// client secret files and CA files.
///
/// Anyone who can write one of them can send the daemon's users to an identity provider of
/// their choosing, or read a client secret; so such a file is refused with a sentence naming
/// it, instead of being used. A file must be owned by root or by the daemon's own user, and
/// writable by nobody else; a secret file must not be readable by everyone either.
public enum FileTrust {
    /// What the file is to the daemon.
    public enum Kind: Sendable {
        case providerFile
        case providersDirectory
        case secret
        case certificate

        var noun: String {
            switch self {
            case .providerFile: "provider file"
            case .providersDirectory: "providers directory"
            case .secret: "secret file"
            case .certificate: "CA file"
            }
        }
    }

    /// Root and the user the daemon runs as.
    public static var trustedOwners: Set<UInt32> { [0, UInt32(geteuid())] }

    /// Why `path` (symbolic links followed) must not be trusted, or `nil` when it may be.
    /// A file that does not exist is not this check's business (`nil`): reading it fails on its own.
    public static func problem(with path: String, as kind: Kind, owners: Set<UInt32> = trustedOwners) -> String? {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: resolved),
              let mode = (attributes[.posixPermissions] as? NSNumber)?.uint16Value,
              let owner = (attributes[.ownerAccountID] as? NSNumber)?.uint32Value else { return nil }
        let octal = "0" + String(mode & 0o7777, radix: 8)
        if !owners.contains(owner) {
            return "the \(kind.noun) \(path) is owned by uid \(owner); it must belong to root or to the daemon's user (uid \(geteuid()))"
        }
        if mode & 0o022 != 0 {
            return "the \(kind.noun) \(path) is writable by \(mode & 0o002 != 0 ? "everyone" : "its group") (mode \(octal)); run chmod go-w on it"
        }
        if kind == .secret, mode & 0o004 != 0 {
            return "the \(kind.noun) \(path) is readable by everyone (mode \(octal)); run chmod o-r on it"
        }
        return nil
    }
}
