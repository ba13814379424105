/// The commit this ckport was built from. A build from source (`swift build`) does not know it;
/// `scripts/release.sh` writes it here for the release build, and puts this file back after.
enum BuildCommit {
    static let commit: String? = nil
}
