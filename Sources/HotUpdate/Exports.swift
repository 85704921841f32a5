// The standard parts under one import: `import HotUpdate` is all an app needs.
@_exported import HotArchive
@_exported import HotAssets
@_exported import HotCore
@_exported import HotManifest
@_exported import HotStore
@_exported import HotTransport
@_exported import HotVerify
