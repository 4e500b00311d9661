#![allow(dead_code, reason = "each example uses a subset")]

//! The examples' one command-line flag parser (no dependency): `--runs N`
//! and the like, each a whole number with a floor, anything else refused
//! with the example's usage line.

/// `--runs N` (at least 2; `default` without the flag), for the example
/// `name`: the only flag it takes.
pub fn runs_flag(name: &str, default: usize) -> Result<usize, String> {
    let mut runs = default;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--runs", Some(v)) => runs = whole(&v, "--runs", 2)?,
            _ => return Err(format!("usage: {name} [--runs N] (got {flag:?})")),
        }
    }
    Ok(runs)
}

/// `v` as a whole number of at least `floor`, or why not (naming `flag`).
pub fn whole(v: &str, flag: &str, floor: usize) -> Result<usize, String> {
    v.parse().ok().filter(|&n| n >= floor).ok_or(format!(
        "{flag}: expected a whole number ≥ {floor}, got {v:?}"
    ))
}
