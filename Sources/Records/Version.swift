/// ckport's version: what `ckport --version` prints, what every bundle's manifest records as
/// its maker, and what the library reports. It follows semantic versioning (MAJOR.MINOR.PATCH:
/// before 1.0.0 a MINOR step may change a format or a flag; a PATCH never does), and
/// CHANGELOG.md says what each version changed for users. The formats it writes have numbers
/// of their own: ``RecordStore``'s `formatVersion` and the bundle manifest's `format`.
public enum CKPortVersion {
    public static let current = "0.3.0"
}
