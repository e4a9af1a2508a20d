//! A completion's text as its tokens arrive: the new text to send after each token, never a
//! partial UTF-8 character and never the start of a stop string that may still complete, so
//! that streamed pieces concatenate to exactly the non-streamed text. A completion cut by its
//! length while it was writing the chat template's end-of-turn marker ends before the marker's
//! start, as it would had the marker been one special token.

/// The text so far and how much of it has been sent.
pub struct TextState {
    stops: Vec<String>,
    /// The chat template's end-of-turn marker (one of `stops`): a trailing prefix of it is
    /// never sent.
    end_of_turn: Option<String>,
    /// Bytes held back at the end: the longest stop string less one.
    hold: usize,
    sent: usize,
}

/// What one more token did.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    /// Text to send now (possibly empty).
    More(String),
    /// A stop string appeared: the remaining text before it; the completion ends.
    Stopped(String),
}

/// The largest char boundary of `s` at or below `i`.
fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl TextState {
    pub fn new(stops: Vec<String>, end_of_turn: Option<String>) -> Self {
        let hold = stops.iter().chain(&end_of_turn).map(|s| s.len().saturating_sub(1)).max().unwrap_or(0);
        Self { stops, end_of_turn, hold, sent: 0 }
    }

    /// `text`: the decoding of every token so far.
    pub fn push(&mut self, text: &str) -> Progress {
        // A trailing U+FFFD may be a character whose remaining bytes have not arrived.
        let stable = text.trim_end_matches('\u{FFFD}');
        if let Some(at) = self.stops.iter().filter_map(|s| stable.find(s.as_str())).min() {
            let rest = stable.get(self.sent..at.max(self.sent)).unwrap_or_default().to_string();
            self.sent = at;
            return Progress::Stopped(rest);
        }
        let upto = floor_boundary(stable, stable.len().saturating_sub(self.hold));
        if upto <= self.sent {
            return Progress::More(String::new());
        }
        let out = stable[self.sent..upto].to_string();
        self.sent = upto;
        Progress::More(out)
    }

    /// The end of the completion without a stop string: whatever was held back, less a
    /// trailing start of the end-of-turn marker.
    pub fn finish(&mut self, text: &str) -> String {
        let end = text.len() - self.marker_start(text);
        let rest = text.get(self.sent..end.max(self.sent)).unwrap_or_default().to_string();
        self.sent = end.max(self.sent);
        rest
    }

    /// The length of the longest proper prefix of the end-of-turn marker that `text` ends with.
    fn marker_start(&self, text: &str) -> usize {
        let Some(m) = &self.end_of_turn else { return 0 };
        (1..m.len()).rev().find(|&n| m.is_char_boundary(n) && text.ends_with(&m[..n])).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeding a text a prefix at a time: the pieces sent concatenate to the text cut at its
    /// first stop string, and nothing of "\n\n" leaks before it is known to be a stop.
    #[test]
    fn streamed_pieces_concatenate_to_the_text_before_the_stop() {
        let full = "Hello, wörld.\nNext\n\nafter";
        let mut st = TextState::new(vec!["\n\n".into(), "zzz".into()], None);
        let mut sent = String::new();
        for end in 1..=full.len() {
            let Some(prefix) = full.get(..end) else { continue };
            match st.push(prefix) {
                Progress::More(s) => sent.push_str(&s),
                Progress::Stopped(s) => {
                    sent.push_str(&s);
                    assert_eq!(sent, "Hello, wörld.\nNext");
                    return;
                }
            }
            assert!(!sent.ends_with('\n') || sent.ends_with(".\n"), "{sent:?}");
        }
        panic!("the stop string was not found");
    }

    /// Without stops every piece is sent at once, except a character still missing bytes.
    #[test]
    fn without_stops_text_is_sent_at_once_and_partial_characters_wait() {
        let mut st = TextState::new(Vec::new(), None);
        assert_eq!(st.push("ab"), Progress::More("ab".into()));
        assert_eq!(st.push("abc\u{FFFD}"), Progress::More("c".into()));
        assert_eq!(st.push("abcé"), Progress::More("é".into()));
        assert_eq!(st.finish("abcé!"), "!");
    }

    /// Cut by its length inside the end-of-turn marker, the answer ends before the marker
    /// (`forty-six<|im_end|` shows `forty-six`); a user's stop string is not cut that way, and
    /// a text that only resembles the marker's end stays.
    #[test]
    fn a_trailing_start_of_the_end_marker_is_held_back() {
        let marker = Some("<|im_end|>".to_string());
        let mut st = TextState::new(vec!["<|im_end|>".into()], marker.clone());
        let mut sent = String::new();
        let full = "forty-six<|im_end|";
        for end in 1..=full.len() {
            let Progress::More(s) = st.push(&full[..end]) else { panic!("no stop yet") };
            sent.push_str(&s);
        }
        sent.push_str(&st.finish(full));
        assert_eq!(sent, "forty-six");
        let mut user_stop = TextState::new(vec!["###".into()], None);
        assert_eq!(user_stop.finish("a ##"), "a ##");
        let mut other = TextState::new(vec!["<|im_end|>".into()], marker);
        assert_eq!(other.finish("x|>"), "x|>");
    }
}
