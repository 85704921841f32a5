import Benchmark

// The entry point package-benchmark's build plugin would generate. Written here instead: the
// plugin's tool is built for the host into the same folder as the package's modules, and each
// time it is rebuilt the whole library compiles again (HOTUPDATE_DEV=1 builds the library, the
// tests and these benchmarks together). `swift package benchmark` runs this target as it runs
// a generated one.
@main
struct BenchmarkRunner: BenchmarkRunnerHooks {
    static func registerBenchmarks() {
        _ = benchmarks()
    }
}
