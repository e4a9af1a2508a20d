//! Every category's spoken forms read back by an independent reader: the `text2num` crate
//! turns the words into digits, which must equal the written form's numbers (parsed here
//! from the written text, not taken from the generator).

use super::*;
use text2num::{Language, replace_numbers_in_text, text2digits};

fn en() -> Language {
    Language::english()
}

/// Words → digits, or panic naming the pair.
fn num(words: &str, pair: &(String, String)) -> String {
    // text2num 2.8's English vocabulary lacks `sixtieth` (it has every other tens ordinal).
    if let Some(head) = words.strip_suffix("sixtieth") {
        let n = if head.trim().is_empty() { 60 } else { num(&format!("{head}sixty"), pair).parse::<u64>().unwrap() };
        return format!("{n}th");
    }
    text2digits(words, &en()).unwrap_or_else(|e| panic!("text2num cannot read `{words}` of {pair:?}: {e:?}"))
}

/// A decimal in words (`minus twelve point five oh six`, `point five`) → `-12.506`, `.5`.
fn decimal_words(w: &str, pair: &(String, String)) -> String {
    let (sign, w) = w.strip_prefix("minus ").map(|r| ("-", r)).unwrap_or(("", w));
    let (int, frac) = w.split_once("point").map(|(a, b)| (a.trim(), Some(b.trim()))).unwrap_or((w.trim(), None));
    let int = if int.is_empty() { String::new() } else { num(int, pair) };
    let frac: String = frac
        .map(|f| f.split(' ').map(|d| if d == "oh" { "0".to_string() } else { num(d, pair) }).collect())
        .unwrap_or_default();
    if frac.is_empty() { format!("{sign}{int}") } else { format!("{sign}{int}.{frac}") }
}

fn pairs_of(g: Generator) -> Vec<(String, String)> {
    let mut rng = SplitMix64::new(11);
    (0..400).map(|_| g(&mut rng)).collect()
}

#[test]
fn cardinals_ordinals_decimals_and_ranges_read_back() {
    for p in pairs_of(cardinal_pair) {
        let (sign, w) = p.1.strip_prefix("negative ").map(|r| ("-", r)).unwrap_or(("", &p.1));
        assert_eq!(format!("{sign}{}", num(w, &p)), p.0.replace(',', ""), "{p:?}");
    }
    for p in pairs_of(ordinal_pair) {
        assert_eq!(num(&p.1, &p), p.0, "{p:?}");
    }
    for p in pairs_of(decimal_pair) {
        let (w, scale) = match p.1.rsplit_once(' ') {
            Some((h, s @ ("million" | "billion" | "trillion"))) => (h, format!(" {s}")),
            _ => (p.1.as_str(), String::new()),
        };
        assert_eq!(format!("{}{scale}", decimal_words(w, &p)), p.0, "{p:?}");
    }
    for p in pairs_of(range_pair) {
        let (a, b) = p.1.split_once(" to ").unwrap();
        assert_eq!(format!("{}-{}", num(a, &p), num(b, &p)), p.0, "{p:?}");
    }
}

#[test]
fn money_and_measures_read_back() {
    let symbols = [("dollar", "$"), ("euro", "€"), ("pound", "£"), ("yen", "¥")];
    for p in pairs_of(money_pair) {
        let (amount, currency) = p.1.rsplit_once(' ').unwrap();
        let sym = symbols.iter().find(|s| currency.starts_with(s.0)).unwrap_or_else(|| panic!("{p:?}")).1;
        let (amount, scale) = match amount.rsplit_once(' ') {
            Some((h, s @ ("million" | "billion"))) => (h, format!(" {s}")),
            _ => (amount, String::new()),
        };
        // The written side without thousands separators and trailing zeros of the cents.
        let written = p.0.replace(',', "");
        let written =
            if written.contains('.') && scale.is_empty() { written.trim_end_matches('0').to_string() } else { written };
        assert_eq!(format!("{sym}{}{scale}", decimal_words(amount, &p)), written, "{p:?}");
    }
    for p in pairs_of(measure_pair) {
        // The number is every word before the unit's name, which starts at the first word
        // text2num does not read as part of a number.
        let words: Vec<&str> = p.1.split(' ').collect();
        let k = (1..=words.len())
            .rev()
            .find(|&k| {
                let w = words[..k].join(" ").replace("negative ", "minus ");
                std::panic::catch_unwind(|| decimal_words(&w, &p)).is_ok()
            })
            .unwrap_or_else(|| panic!("no number in {p:?}"));
        let value = decimal_words(&words[..k].join(" ").replace("negative ", "minus "), &p);
        assert!(p.0.starts_with(&value), "{p:?}: read {value}");
    }
}

#[test]
fn dates_and_times_round_trip() {
    for p in pairs_of(date_pair) {
        let digits_in = |s: &str| -> Vec<u64> {
            s.split(|c: char| !c.is_ascii_digit()).filter(|t| !t.is_empty()).map(|t| t.parse().unwrap()).collect()
        };
        let written = digits_in(&p.0);
        // Spoken: ordinals → digits, each year half → digits; compare the multiset of numbers
        // with a month name mapped to its number when the written side has it as digits.
        let read = replace_numbers_in_text(&p.1, &en(), 0.0);
        let mut spoken = digits_in(&read);
        if let Some(m) = MONTHS.iter().position(|m| p.1.contains(m)) {
            spoken.push(m as u64 + 1);
        }
        // Years are read as two halves ("twenty twelve" → 20 12): join any pair of halves that
        // forms a written number.
        let joined: Vec<u64> = spoken.windows(2).map(|w| w[0] * 100 + w[1]).collect();
        for n in &written {
            assert!(
                spoken.contains(n) || joined.contains(n) || (p.0.starts_with('\'') && p.1.ends_with("ies")),
                "{p:?}: {n} not read back from `{read}`"
            );
        }
    }
    for p in pairs_of(time_pair) {
        let read = replace_numbers_in_text(&p.1.replace(" oh ", " "), &en(), 0.0);
        let nums: Vec<u64> =
            read.split(|c: char| !c.is_ascii_digit()).filter(|t| !t.is_empty()).map(|t| t.parse().unwrap()).collect();
        let written: Vec<u64> =
            p.0.split(|c: char| !c.is_ascii_digit()).filter(|t| !t.is_empty()).map(|t| t.parse().unwrap()).collect();
        assert_eq!(nums[0], written[0], "{p:?}: hour");
        let minutes = nums.get(1).copied().unwrap_or(0);
        assert_eq!(minutes, written.get(1).copied().unwrap_or(0), "{p:?}: minutes from `{read}`");
        assert_eq!(p.1.contains("AM"), p.0.contains('a'), "{p:?}");
    }
}

#[test]
fn fractions_read_back() {
    for p in pairs_of(fraction_pair) {
        if !p.0.contains('/') {
            continue; // vulgar fraction characters: a fixed table
        }
        let (whole, frac) = p.1.split_once(" and ").map(|(w, f)| (Some(w), f)).unwrap_or((None, &p.1));
        // Numerator (a cardinal) and denominator (an ordinal, plural) share no marker in words:
        // every split where both sides read as numbers is a candidate.
        let words: Vec<&str> = frac.split(' ').collect();
        let w = whole.map(|w| format!("{} ", num(w, &p))).unwrap_or_default();
        let reads: Vec<String> = (1..words.len())
            .filter_map(|k| {
                let (n, d) = (words[..k].join(" "), words[k..].join(" "));
                let n = text2digits(&n, &en()).ok()?;
                let d = match d.trim_end_matches('s') {
                    "half" | "halve" => "2".to_string(),
                    "quarter" => "4".to_string(),
                    o => {
                        std::panic::catch_unwind(|| num(o, &p)).ok()?.trim_end_matches(char::is_alphabetic).to_string()
                    }
                };
                Some(format!("{w}{n}/{d}"))
            })
            .collect();
        assert!(reads.contains(&p.0), "{p:?}: read as {reads:?}");
    }
}

const DIGITS: [&str; 10] = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"];

#[test]
fn phone_numbers_and_addresses_read_back() {
    let digit = |w: &str| DIGITS.iter().position(|d| *d == w);
    for p in pairs_of(telephone_pair) {
        let read: String = p.1.split([' ', ',']).filter_map(digit).map(|d| d.to_string()).collect();
        let written: String = p.0.chars().filter(char::is_ascii_digit).collect();
        assert_eq!(read, written, "{p:?}");
    }
    for p in pairs_of(electronic_pair) {
        let mut s = p.1.replace(" at ", "@").replace(" dot ", ".");
        for (i, d) in DIGITS.iter().enumerate() {
            s = s.replace(&format!(" {d}"), &i.to_string());
        }
        assert_eq!(s, p.0, "{p:?}");
    }
}

/// A Roman numeral's value by the subtractive rule (a symbol before a larger one counts
/// negative).
fn roman_value(r: &str) -> u64 {
    let v = |c| match c {
        'I' => 1,
        'V' => 5,
        'X' => 10,
        'L' => 50,
        'C' => 100,
        _ => panic!("{c}"),
    };
    let cs: Vec<u64> = r.chars().map(v).collect();
    cs.iter()
        .enumerate()
        .map(|(i, &x)| if cs.get(i + 1).is_some_and(|&y| y > x) { x.wrapping_neg() } else { x })
        .fold(0u64, u64::wrapping_add)
}

#[test]
fn roman_numerals_read_back() {
    for p in pairs_of(roman_pair) {
        assert_eq!(num(&p.1, &p), roman_value(&p.0).to_string(), "{p:?}");
    }
}

/// The generator is seeded: the same seed gives the same pairs; the test split shares no
/// source with training; every category occurs.
#[test]
fn splits_are_seeded_disjoint_and_cover_every_category() {
    let (a, t) = splits(4, 3000, 200);
    assert_eq!(a, splits(4, 3000, 200).0);
    assert_ne!(a, splits(5, 3000, 200).0);
    assert_eq!(t.len(), 200);
    let train: std::collections::HashSet<&str> = a.iter().map(|p| p.source.as_str()).collect();
    assert!(t.iter().all(|p| !train.contains(p.source.as_str())));
    for (name, _, _) in CATEGORIES {
        assert!(a.iter().any(|p| p.category.as_deref() == Some(name)), "{name}");
    }
}
