import AuthGateCore
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// A platform's short-lived JWT in a file (a Kubernetes projected service-account token, a CI
/// job's ID token, a SPIFFE JWT-SVID): read again for every request that sends it, because the
/// platform rotates it in place (kubelet swaps a symbolic link), and never sent once its `exp`
/// has passed. authgated cannot verify its signature (only the provider knows the issuer's
/// keys); it checks what would make the provider refuse it anyway, to say so first and clearly.
struct WorkloadTokenFile: Sendable, Hashable {
    let path: String
    /// The provider-file key that names it (`client_assertion_file`, `assertion_file`,
    /// `subject_token_file`), for errors.
    let field: String
    let provider: String

    /// Clock skew tolerated for `nbf` (the platform's clock may run ahead of this machine's).
    static let leeway: TimeInterval = 60
    static let maximumSize = 64 * 1024

    /// The token now in the file.
    /// - Throws: `workload_token_invalid` naming the file and why: missing, unreadable, not
    ///   trusted (``FileTrust``), not a JWT, without `exp`, expired, or not yet valid.
    func read(now: Date) throws(AuthGateError) -> String {
        let bytes: [UInt8]
        switch FileTrust.read(path, as: .workloadToken, maximumSize: Self.maximumSize) {
        case .success(let read): bytes = read
        case .failure(let problem): throw invalid("\(problem.refused ? "refused: " : "")\(problem)")
        }
        let token = String(decoding: bytes, as: UTF8.self).trimming(while: \.isWhitespace)
        guard TokenShape.isCompactJWS(token), let claims = Self.claims(of: token) else {
            throw invalid("\(path) does not hold a JWT (three base64url parts joined by dots, the second a JSON object)")
        }
        guard case .number(let expiry) = claims["exp"] else {
            throw invalid("the JWT in \(path) has no exp claim, so nothing says when it stops being valid")
        }
        let seconds = now.timeIntervalSince1970
        guard expiry > seconds else {
            throw invalid("the JWT in \(path) expired \(Int(seconds - expiry)) s ago; the platform should have replaced it (is the volume still mounted?)")
        }
        if case .number(let notBefore) = claims["nbf"], notBefore > seconds + Self.leeway {
            throw invalid("the JWT in \(path) is not valid for another \(Int(notBefore - seconds)) s (nbf); check this machine's clock")
        }
        return token
    }

    /// The file's identity and age (links followed): kubelet's rotation makes a new file, so
    /// any rewrite changes it. `nil` when the file cannot be found.
    func revision() -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return "\(info.st_dev):\(info.st_ino):\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec):\(info.st_size)"
    }

    /// The claims of a compact JWS, unverified.
    static func claims(of token: String) -> [String: JSONValue]? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decode(String(parts[1])) else { return nil }
        return (try? JSONValue.parse(Data(payload)))?.objectValue
    }

    private func invalid(_ why: String) -> AuthGateError {
        AuthGateError(.workloadTokenInvalid, "\(provider) cannot sign in with the platform token of \(field): \(why).")
    }
}
