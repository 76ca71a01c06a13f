import ArgumentParser
import AuthGateRPC
import AuthGateTools

struct Rekey: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Seal every saved session again under a new storage key (admins only).",
        discussion:
            "The daemon makes a new key, seals every user's sessions file with it, then puts it where the old key lived (the Secret Service or the state directory's authgate.key); a crash midway loses nothing. A key given by systemd as a credential is refused: the error says how to rotate it."
    )

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let result = try global.daemon.call(.storageRekey, EmptyResult(), as: StorageRekeyResult.self, progress: "Rekeying…")
        if global.json { return try global.printJSON(result) }
        print(AnswerText.rekeyed(result))
    }
}
