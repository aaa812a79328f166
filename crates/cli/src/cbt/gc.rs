//! GC policies in `cbt`'s syntax, both ways.
//!
//! Parsing: `never` | `maxage=<duration>` | `maxversions=<n>`, joined by `and` (`&&`)
//! or `or` (`||`); `and` binds tighter than `or`, so `maxversions=1 or maxage=1d and
//! maxversions=5` is `v1 || (age && v5)`. Durations are integers with units `d`, `h`,
//! `m`, `s`, `ms`, `us`, and may be compound (`1h30m`).
//!
//! Printing ([`describe`]): `versions() > 3`, `age() > 10d`, joined by `&&` / `||`
//! with nested groups in parentheses; no rule prints `<never>`.

use almanac_api::google::bigtable::admin::v2 as admin;
use almanac_api::google::bigtable::admin::v2::gc_rule::{Intersection, Rule, Union};
use anyhow::Context;

const US_PER_SEC: i64 = 1_000_000;

/// Duration units, largest first: the suffix and its length in microseconds.
const UNITS: [(&str, i64); 6] = [
    ("d", 86_400 * US_PER_SEC),
    ("h", 3_600 * US_PER_SEC),
    ("m", 60 * US_PER_SEC),
    ("s", US_PER_SEC),
    ("ms", 1_000),
    ("us", 1),
];

/// `FAMILY[:POLICY]` as in `createtable ... families=` (no policy: keep everything).
pub fn parse_family(spec: &str) -> anyhow::Result<(String, Option<admin::GcRule>)> {
    match spec.split_once(':') {
        Some((name, policy)) => {
            anyhow::ensure!(!name.is_empty(), "empty family name in {spec:?}");
            let rule =
                parse_policy(policy).with_context(|| format!("GC policy of family {name}"))?;
            Ok((name.to_string(), rule))
        }
        None => {
            anyhow::ensure!(!spec.is_empty(), "empty family name");
            Ok((spec.to_string(), None))
        }
    }
}

/// A whole policy; `None` for `never`.
pub fn parse_policy(text: &str) -> anyhow::Result<Option<admin::GcRule>> {
    let spaced = text.replace("||", " or ").replace("&&", " and ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    anyhow::ensure!(
        !tokens.is_empty(),
        "empty GC policy: try maxage=<d>, maxversions=<n> or never"
    );
    if tokens.iter().any(|t| t.eq_ignore_ascii_case("never")) {
        anyhow::ensure!(
            tokens.len() == 1,
            "`never` cannot be combined with other rules"
        );
        return Ok(None);
    }
    let mut alternatives = Vec::new();
    for group in tokens.split(|t| t.eq_ignore_ascii_case("or")) {
        let mut all = Vec::new();
        for part in group.split(|t| t.eq_ignore_ascii_case("and")) {
            let [atom] = part else {
                anyhow::bail!(
                    "bad GC policy {text:?}: expected `and`/`or` between maxage=<d> and maxversions=<n>"
                );
            };
            all.push(parse_atom(atom)?);
        }
        alternatives.push(combine(all, |rules| {
            Rule::Intersection(Intersection { rules })
        }));
    }
    Ok(Some(combine(alternatives, |rules| {
        Rule::Union(Union { rules })
    })))
}

fn combine(
    mut rules: Vec<admin::GcRule>,
    join: impl FnOnce(Vec<admin::GcRule>) -> Rule,
) -> admin::GcRule {
    if rules.len() == 1 {
        rules.remove(0)
    } else {
        admin::GcRule {
            rule: Some(join(rules)),
        }
    }
}

fn parse_atom(atom: &str) -> anyhow::Result<admin::GcRule> {
    let rule = match atom.split_once('=') {
        Some(("maxversions", n)) => {
            let n: i32 = n
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .with_context(|| format!("maxversions={n:?}: expected a positive integer"))?;
            Rule::MaxNumVersions(n)
        }
        Some(("maxage", d)) => max_age(parse_duration_us(d)?),
        _ => anyhow::bail!("bad GC rule {atom:?}: expected maxage=<d>, maxversions=<n> or never"),
    };
    Ok(admin::GcRule { rule: Some(rule) })
}

/// A `MaxAge` rule. Its duration is a `prost_types::Duration`; it is built through the
/// variant so that this binary needs no direct `prost-types` dependency.
fn max_age(us: i64) -> Rule {
    let mut rule = Rule::MaxAge(Default::default());
    if let Rule::MaxAge(d) = &mut rule {
        d.seconds = us / US_PER_SEC;
        d.nanos = (us % US_PER_SEC * 1_000) as i32;
    }
    rule
}

/// `10d`, `2h`, `1h30m`, `500ms` as microseconds (positive).
pub fn parse_duration_us(text: &str) -> anyhow::Result<i64> {
    let bad = || anyhow::anyhow!("bad duration {text:?}: expected e.g. 10d, 2h, 30m, 90s, 500ms");
    let mut rest = text;
    let mut total: i64 = 0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let n: i64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let (_, us) = UNITS.iter().find(|(u, _)| *u == unit).ok_or_else(bad)?;
        total = n
            .checked_mul(*us)
            .and_then(|x| total.checked_add(x))
            .ok_or_else(bad)?;
        rest = &rest[unit_len..];
    }
    anyhow::ensure!(total > 0, "duration {text:?} must be positive");
    Ok(total)
}

/// A duration in the largest unit that divides it exactly (`10d`, `36h`, `1500ms`).
pub fn format_duration_us(us: i64) -> String {
    UNITS.iter().find(|(_, per)| us % per == 0).map_or_else(
        || format!("{us}us"),
        |(unit, per)| format!("{}{unit}", us / per),
    )
}

/// A GC rule as `ls TABLE` prints it.
pub fn describe(rule: Option<&admin::GcRule>) -> String {
    match rule.and_then(|r| r.rule.as_ref()) {
        None => "<never>".to_string(),
        Some(r) => describe_rule(r, false),
    }
}

fn describe_rule(rule: &Rule, nested: bool) -> String {
    let group = |rules: &[admin::GcRule], op: &str| {
        let parts: Vec<String> = rules
            .iter()
            .map(|r| {
                r.rule
                    .as_ref()
                    .map_or_else(|| "<never>".to_string(), |r| describe_rule(r, true))
            })
            .collect();
        let joined = parts.join(op);
        if nested && parts.len() > 1 {
            format!("({joined})")
        } else {
            joined
        }
    };
    match rule {
        Rule::MaxNumVersions(n) => format!("versions() > {n}"),
        Rule::MaxAge(d) => format!(
            "age() > {}",
            format_duration_us(d.seconds * US_PER_SEC + i64::from(d.nanos) / 1_000)
        ),
        Rule::Intersection(i) => group(&i.rules, " && "),
        Rule::Union(u) => group(&u.rules, " || "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(policy: &str) -> anyhow::Result<String> {
        Ok(describe(parse_policy(policy)?.as_ref()))
    }

    #[test]
    fn cbt_policies_parse_and_print() -> anyhow::Result<()> {
        assert_eq!(roundtrip("maxage=10d")?, "age() > 10d");
        assert_eq!(roundtrip("maxage=2h")?, "age() > 2h");
        assert_eq!(roundtrip("maxage=1h30m")?, "age() > 90m");
        assert_eq!(
            roundtrip("maxversions=3 or maxage=1d")?,
            "versions() > 3 || age() > 1d"
        );
        assert_eq!(
            roundtrip("maxage=10d||maxversions=1")?,
            "age() > 10d || versions() > 1"
        );
        assert_eq!(
            roundtrip("maxversions=1 or maxage=1d and maxversions=5")?,
            "versions() > 1 || (age() > 1d && versions() > 5)"
        );
        assert_eq!(roundtrip("never")?, "<never>");
        Ok(())
    }

    #[test]
    fn bad_policies_are_refused() {
        for bad in [
            "",
            "maxage=",
            "maxage=10",
            "maxage=10y",
            "maxversions=0",
            "maxversions=x",
            "never and maxage=1d",
            "maxage=1d maxversions=2",
            "or maxage=1d",
            "maxage=1d or",
            "bogus=1",
        ] {
            assert!(parse_policy(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn families_take_an_optional_policy() -> anyhow::Result<()> {
        let (name, rule) = parse_family("cf1")?;
        assert_eq!((name.as_str(), rule), ("cf1", None));
        let (name, rule) = parse_family("cf2:maxversions=3")?;
        assert_eq!(
            (name.as_str(), describe(rule.as_ref()).as_str()),
            ("cf2", "versions() > 3")
        );
        Ok(())
    }
}
