//! A suite macro (`contract_suite!`) names its scenario functions by hand;
//! a function left off that list compiles and silently never runs. These
//! helpers read a suite's own source and compare: the macro's generated
//! `every_contract_suite_function_is_listed` test fails on any difference.

/// The functions in `source` a suite macro can call with a target alone:
/// `fn NAME<T: Target>(t: &T)` (any parameter name, one parameter, nothing
/// returned), `pub` or not, in source order. Helpers that take more, or
/// more generics, are not scenarios and are left out.
pub fn suite_functions(source: &str) -> Vec<String> {
    let lines: Vec<&str> = source.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if !(trimmed.starts_with("fn ") || trimmed.starts_with("pub fn ")) {
            continue;
        }
        // The signature up to its body, however rustfmt wrapped it, with
        // the whitespace taken out.
        let mut sig = String::new();
        for l in &lines[i..] {
            let end = l.find(['{', ';']);
            sig.extend(l[..end.unwrap_or(l.len())].split_whitespace());
            if end.is_some() {
                break;
            }
        }
        let sig = sig.strip_prefix("pub").unwrap_or(&sig);
        let Some(sig) = sig.strip_prefix("fn") else {
            continue;
        };
        let Some(split) = sig.find(['<', '(']) else {
            continue;
        };
        let (name, rest) = sig.split_at(split);
        if takes_a_target_alone(rest) {
            found.push(name.to_owned());
        }
    }
    found
}

/// `<T:Target>(IDENT:&T)`, with or without a trailing comma.
fn takes_a_target_alone(rest: &str) -> bool {
    let Some(param) = rest
        .strip_prefix("<T:Target>(")
        .and_then(|r| r.strip_suffix(')'))
    else {
        return false;
    };
    let param = param.strip_suffix(',').unwrap_or(param);
    param.split_once(':').is_some_and(|(ident, ty)| {
        ty == "&T"
            && !ident.is_empty()
            && ident.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
    })
}

/// How `listed` (a suite macro's names) differs from the suite functions
/// in `source`: `Err` names every function the list leaves off (they would
/// never run) and every listed name the reader did not find (so a reader
/// that stopped recognising the source fails instead of passing on an
/// empty comparison).
///
/// # Errors
/// A message naming the differences.
pub fn check(source: &str, listed: &[&str]) -> Result<(), String> {
    let found = suite_functions(source);
    let unlisted: Vec<&str> = found
        .iter()
        .map(String::as_str)
        .filter(|f| !listed.contains(f))
        .collect();
    let unrecognised: Vec<&str> = listed
        .iter()
        .copied()
        .filter(|l| !found.iter().any(|f| f == l))
        .collect();
    if unlisted.is_empty() && unrecognised.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "suite functions the macro does not list (they never run; list them, \
             and make them `pub`): {unlisted:?}; listed names not found as \
             `fn NAME<T: Target>(t: &T)` in the source: {unrecognised:?}"
        ))
    }
}
