import Logging

extension StoreSnapshot {
    /// Applies a ``UpdatePlan/Change/disable`` or ``UpdatePlan/Change/enable`` plan entry: the
    /// installed files stay where they are, only the package's state changes, so a disabled
    /// package stops being resolved (the bundle answers instead) and comes back without a
    /// download when it is enabled.
    ///
    /// - Returns: The outcome to report for the package.
    mutating func setEnabled(_ entry: UpdatePlan.PackagePlan, logger: Logger) -> SyncReport.PackageOutcome {
        guard var record = packages[entry.id] else {
            return SyncReport.PackageOutcome(id: entry.id, change: entry.change, activeVersion: nil)
        }
        record.state = entry.change == .disable ? .disabled : .installed
        record.lastError = nil
        record.lastErrorCode = nil
        packages[entry.id] = record
        logger.info(
            entry.change == .disable ? "disabled" : "enabled",
            metadata: ["package": "\(entry.id)", "version": "\(record.active?.version ?? "-")"]
        )
        return SyncReport.PackageOutcome(id: entry.id, change: entry.change, activeVersion: record.active?.version)
    }
}
