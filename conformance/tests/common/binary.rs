//! Running the crate's binaries from the tests.

/// Runs `exe` with `args`: its exit code, stdout and stderr.
pub fn run(exe: &str, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(exe)
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.code().expect("an exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
