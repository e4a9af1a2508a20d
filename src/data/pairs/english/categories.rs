//! One generator per category: a written form and its spoken form, in the held-out set's
//! conventions (see [`super::words`] and the table in docs/studies.md).

use super::words::{cardinal, cardinal_u, decimal, digits, ordinal, year};
use crate::rng::SplitMix64;

/// A uniform integer in `lo..=hi`.
pub fn int(rng: &mut SplitMix64, lo: i64, hi: i64) -> i64 {
    lo + (rng.next_u64() % (hi - lo + 1) as u64) as i64
}

pub fn pick<'a, T>(rng: &mut SplitMix64, xs: &'a [T]) -> &'a T {
    &xs[(rng.next_u64() % xs.len() as u64) as usize]
}

fn coin(rng: &mut SplitMix64, p: f64) -> bool {
    rng.uniform() < p
}

/// A magnitude spread over orders: 0–9, 10–99, …, up to 10⁹.
fn magnitude(rng: &mut SplitMix64, max_digits: u32) -> u64 {
    let d = int(rng, 1, max_digits as i64) as u32;
    int(rng, if d == 1 { 0 } else { 10i64.pow(d - 1) }, 10i64.pow(d) - 1) as u64
}

/// Thousands separators, as often written.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A year whose halves are both ≥ 10 (see [`year`]).
fn a_year(rng: &mut SplitMix64) -> u64 {
    (int(rng, 11, 20) * 100 + int(rng, 10, 99)) as u64
}

pub fn cardinal_pair(rng: &mut SplitMix64) -> (String, String) {
    let mut n = magnitude(rng, 7);
    // Bare 4-digit numbers from 1000 to 2999 read as years in the held-out set; keep them out.
    if (1000..3000).contains(&n) {
        n += 2000;
    }
    let neg = coin(rng, 0.15) && n > 0;
    let written = if n >= 10_000 && coin(rng, 0.5) { grouped(n) } else { n.to_string() };
    let value = if neg { -(n as i64) } else { n as i64 };
    (format!("{}{written}", if neg { "-" } else { "" }), cardinal(value))
}

pub fn ordinal_pair(rng: &mut SplitMix64) -> (String, String) {
    let n = if coin(rng, 0.8) { int(rng, 1, 120) as u64 } else { int(rng, 1, 999) as u64 };
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    (format!("{n}{suffix}"), ordinal(n))
}

/// A decimal with 1–4 fractional digits (not ending in 0) and an integer part below 10⁴.
fn decimal_parts(rng: &mut SplitMix64) -> (String, String) {
    let int_part = magnitude(rng, 4).to_string();
    let places = int(rng, 1, 4) as usize;
    let mut frac: String = (0..places).map(|_| char::from(b'0' + int(rng, 0, 9) as u8)).collect();
    frac.pop();
    frac.push(char::from(b'0' + int(rng, 1, 9) as u8));
    (int_part, frac)
}

pub fn decimal_pair(rng: &mut SplitMix64) -> (String, String) {
    let (i, f) = decimal_parts(rng);
    let neg = coin(rng, 0.15);
    let sign = if neg { "-" } else { "" };
    if coin(rng, 0.3) {
        let scale = pick(rng, &["million", "billion", "trillion"]);
        return (format!("{sign}{i}.{f} {scale}"), format!("{} {scale}", decimal(&i, &f, neg)));
    }
    (format!("{sign}{i}.{f}"), decimal(&i, &f, neg))
}

/// Currency symbol, singular and plural name.
const CURRENCIES: [(&str, &str, &str); 4] =
    [("$", "dollar", "dollars"), ("€", "euro", "euros"), ("£", "pound", "pounds"), ("¥", "yen", "yen")];

pub fn money_pair(rng: &mut SplitMix64) -> (String, String) {
    let (sym, one, many) = *pick(rng, &CURRENCIES);
    let n = magnitude(rng, 5);
    match int(rng, 0, 2) {
        0 if n == 1 => (format!("{sym}1"), format!("one {one}")),
        0 => (format!("{sym}{}", grouped(n)), format!("{} {many}", cardinal_u(n))),
        1 => {
            let scale = pick(rng, &["million", "billion"]);
            let (i, f) = (int(rng, 1, 999).to_string(), int(rng, 1, 9).to_string());
            if coin(rng, 0.5) {
                (format!("{sym}{i} {scale}"), format!("{} {scale} {many}", cardinal_u(i.parse().unwrap())))
            } else {
                (format!("{sym}{i}.{f} {scale}"), format!("{} {scale} {many}", decimal(&i, &f, false)))
            }
        }
        _ => {
            // Cents as the held-out set reads them: a decimal, trailing zeros dropped.
            let cents = int(rng, 1, 99);
            let written = format!("{sym}{n}.{cents:02}");
            let frac = format!("{cents:02}").trim_end_matches('0').to_string();
            (written, format!("{} {many}", decimal(&n.to_string(), &frac, false)))
        }
    }
}

/// Written unit, singular and plural spoken name.
const UNITS: [(&str, &str, &str); 18] = [
    ("kg", "kilogram", "kilograms"),
    ("g", "gram", "grams"),
    ("mg", "milligram", "milligrams"),
    ("km", "kilometer", "kilometers"),
    ("m", "meter", "meters"),
    ("cm", "centimeter", "centimeters"),
    ("mm", "millimeter", "millimeters"),
    ("μm", "micrometer", "micrometers"),
    ("ml", "milliliter", "milliliters"),
    ("cm²", "square centimeter", "square centimeters"),
    ("m²", "square meter", "square meters"),
    ("km/h", "kilometer per hour", "kilometers per hour"),
    ("mph", "mile per hour", "miles per hour"),
    ("°C", "degree Celsius", "degrees Celsius"),
    ("°F", "degree Fahrenheit", "degrees Fahrenheit"),
    ("GB", "gigabyte", "gigabytes"),
    ("kW", "kilowatt", "kilowatts"),
    ("lb", "pound", "pounds"),
];

pub fn measure_pair(rng: &mut SplitMix64) -> (String, String) {
    let (unit, one, many) = *pick(rng, &UNITS);
    let space = if coin(rng, 0.5) { " " } else { "" };
    if coin(rng, 0.4) {
        let (i, f) = decimal_parts(rng);
        let i = if coin(rng, 0.2) { String::new() } else { i };
        return (format!("{i}.{f}{space}{unit}"), format!("{} {many}", decimal(&i, &f, false)));
    }
    let n = magnitude(rng, 4) as i64;
    let n = if coin(rng, 0.1) && n > 0 { -n } else { n };
    let name = if n == 1 { one } else { many };
    (format!("{n}{space}{unit}"), format!("{} {name}", cardinal(n)))
}

pub const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
}

pub fn date_pair(rng: &mut SplitMix64) -> (String, String) {
    let m = int(rng, 1, 12) as usize;
    let d = int(rng, 1, 28) as u64;
    let y = a_year(rng);
    let month = MONTHS[m - 1];
    let day = ordinal(d);
    let yr = year(y);
    let abbr = if month.len() <= 4 { month.to_string() } else { format!("{}.", &month[..3]) };
    match int(rng, 0, 8) {
        0 => (format!("{abbr} {d}, {y}"), format!("the {day} of {month} , {yr}")),
        1 => (format!("{} {d}, {y}", capitalized(month)), format!("the {day} of {month} , {yr}")),
        2 => (format!("{abbr} {d}"), format!("the {day} of {month}")),
        3 => (format!("{d} {month} {y}"), format!("the {day} of {month} {yr}")),
        4 => {
            let sep = pick(rng, &["-", ".", "/"]);
            (format!("{y}{sep}{m:02}{sep}{d:02}"), format!("the {day} of {month} {yr}"))
        }
        5 => (format!("{} {y}", capitalized(month)), format!("{month} {yr}")),
        6 => {
            let decade = int(rng, 2, 9) as u64 * 10;
            // `seventy` → `seventies`.
            let w = cardinal_u(decade);
            (format!("'{decade}s"), format!("{}ies", &w[..w.len() - 1]))
        }
        7 => (format!("{y} B.C"), format!("{yr} BC")),
        _ => {
            let yy = int(rng, 10, 99) as u64;
            if coin(rng, 0.5) {
                let h = int(rng, 1, 2) as u64;
                (format!("{h}H{yy}"), format!("the {} half of {}", ordinal(h), cardinal_u(yy)))
            } else {
                let q = int(rng, 1, 4) as u64;
                (format!("{q}Q{yy}"), format!("the {} quarter of {}", ordinal(q), cardinal_u(yy)))
            }
        }
    }
}

pub fn time_pair(rng: &mut SplitMix64) -> (String, String) {
    let (h, m) = (int(rng, 1, 12), int(rng, 0, 59));
    let suffix = *pick(rng, &["a.m.", "p.m.", "am", "pm", ""]);
    let spoken_suffix = match suffix {
        "" => "",
        s if s.starts_with('a') => " AM",
        _ => " PM",
    };
    let zone = if !suffix.is_empty() && coin(rng, 0.2) { *pick(rng, &["est", "pst", "utc", "gmt"]) } else { "" };
    let (wz, sz) = if zone.is_empty() {
        (String::new(), String::new())
    } else {
        (format!(" {zone}"), format!(" {}", zone.to_uppercase()))
    };
    let hw = cardinal_u(h as u64);
    let minutes = match m {
        0 if suffix.is_empty() => " o'clock".to_string(),
        0 => String::new(),
        1..=9 => format!(" oh {}", cardinal_u(m as u64)),
        _ => format!(" {}", cardinal_u(m as u64)),
    };
    let sep = if coin(rng, 0.8) { ":" } else { "." };
    let hh = if coin(rng, 0.3) { format!("{h:02}") } else { h.to_string() };
    if !suffix.is_empty() && m == 0 && coin(rng, 0.4) {
        return (format!("{h} {suffix}{wz}"), format!("{hw}{spoken_suffix}{sz}"));
    }
    let space = if suffix.is_empty() { "" } else { " " };
    (format!("{hh}{sep}{m:02}{space}{suffix}{wz}"), format!("{hw}{minutes}{spoken_suffix}{sz}"))
}

pub fn fraction_pair(rng: &mut SplitMix64) -> (String, String) {
    const VULGAR: [(&str, &str); 5] =
        [("½", "one half"), ("¼", "one quarter"), ("¾", "three quarters"), ("⅓", "one third"), ("⅔", "two thirds")];
    if coin(rng, 0.15) {
        let (w, s) = *pick(rng, &VULGAR);
        return (w.to_string(), s.to_string());
    }
    let top = if coin(rng, 0.7) { 10 } else { 64 };
    let den = int(rng, 2, top) as u64;
    let num = int(rng, 1, den as i64 * 2) as u64;
    let den_word = match den {
        2 => "half".to_string(),
        4 => "quarter".to_string(),
        _ => ordinal(den),
    };
    let den_word = if num == 1 {
        den_word
    } else if den == 2 {
        "halves".into()
    } else {
        format!("{den_word}s")
    };
    let frac = format!("{} {den_word}", cardinal_u(num));
    if coin(rng, 0.3) {
        let whole = int(rng, 1, 99) as u64;
        return (format!("{whole} {num}/{den}"), format!("{} and {frac}", cardinal_u(whole)));
    }
    (format!("{num}/{den}"), frac)
}

fn digit_string(rng: &mut SplitMix64, n: usize) -> String {
    (0..n).map(|_| char::from(b'0' + int(rng, 0, 9) as u8)).collect()
}

pub fn telephone_pair(rng: &mut SplitMix64) -> (String, String) {
    let groups = [digit_string(rng, 3), digit_string(rng, 3), digit_string(rng, 4)];
    let spoken: Vec<String> = groups.iter().map(|g| digits(g, "zero")).collect();
    let (mut w, mut s) = (groups.join("-"), spoken.join(", "));
    if coin(rng, 0.4) {
        let cc = int(rng, 1, 99).to_string();
        w = format!("+{cc} {w}");
        s = format!("plus {}, {s}", digits(&cc, "zero"));
    }
    (w, s)
}

pub fn electronic_pair(rng: &mut SplitMix64) -> (String, String) {
    const NAMES: [&str; 8] = ["anna", "bob", "info", "mail", "sales", "cdf", "team", "jlee"];
    const HOSTS: [&str; 6] = ["abc", "example", "normlab", "uni", "shop", "news"];
    const TLDS: [&str; 5] = ["com", "org", "edu", "net", "io"];
    let (host, tld) = (*pick(rng, &HOSTS), *pick(rng, &TLDS));
    if coin(rng, 0.4) {
        return (format!("{host}.{tld}"), format!("{host} dot {tld}"));
    }
    let name = *pick(rng, &NAMES);
    let num = if coin(rng, 0.5) { int(rng, 1, 99).to_string() } else { String::new() };
    let spoken_num = if num.is_empty() { String::new() } else { format!(" {}", digits(&num, "zero")) };
    (format!("{name}{num}@{host}.{tld}"), format!("{name}{spoken_num} at {host} dot {tld}"))
}

pub fn roman(n: u64) -> String {
    const TABLE: [(u64, &str); 13] = [
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ];
    let (mut n, mut s) = (n, String::new());
    for (v, r) in TABLE {
        while n >= v {
            s.push_str(r);
            n -= v;
        }
    }
    s
}

pub fn roman_pair(rng: &mut SplitMix64) -> (String, String) {
    let n = int(rng, 2, 49) as u64;
    (roman(n), cardinal_u(n))
}

pub fn range_pair(rng: &mut SplitMix64) -> (String, String) {
    let a = int(rng, 0, 98);
    let b = int(rng, a + 1, 99);
    (format!("{a}-{b}"), format!("{} to {}", cardinal_u(a as u64), cardinal_u(b as u64)))
}

/// Abbreviations and their spoken forms, from the held-out set's whitelist conventions.
pub const ABBREVIATIONS: [(&str, &str); 16] = [
    ("Dr.", "Doctor"),
    ("Mr.", "Mister"),
    ("Mrs.", "Misses"),
    ("Hon.", "Honorable"),
    ("Mt.", "Mount"),
    ("Maj.", "Major"),
    ("Rev.", "Reverend"),
    ("Gov.", "governor"),
    ("vs.", "versus"),
    ("Ph.D.", "PHD"),
    ("Co.", "company"),
    ("Expy", "Expressway"),
    ("CA", "California"),
    ("PA", "Pennsylvania"),
    ("NY", "New York"),
    ("TX", "Texas"),
];

pub fn abbreviation_pair(rng: &mut SplitMix64) -> (String, String) {
    let (w, s) = *pick(rng, &ABBREVIATIONS);
    (w.to_string(), s.to_string())
}

/// Text that stays as it is (the held-out set's `word` category): words, names, single
/// letters and words in other scripts.
pub fn word_pair(rng: &mut SplitMix64) -> (String, String) {
    const WORDS: [&str; 24] = [
        "smile",
        "hello",
        "world",
        "river",
        "Paris",
        "Toyota",
        "a",
        "A",
        "x",
        "café",
        "naïve",
        "中国",
        "北京",
        "Москва",
        "data",
        "normal",
        "layer",
        "token",
        "Zürich",
        "über",
        "the",
        "quick",
        "HTML",
        "OK",
    ];
    let n = int(rng, 1, 3);
    let w: Vec<&str> = (0..n).map(|_| *pick(rng, &WORDS)).collect();
    let s = w.join(" ");
    (s.clone(), s)
}
