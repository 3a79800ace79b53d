"""Tokenizers for the language models: characters, and keras-hub subwords.

`CharacterTokenizer` is a keras-hub `Tokenizer` whose vocabulary is the set
of characters of a corpus (nanoGPT's Tiny Shakespeare set-up). Because it is
a keras-hub tokenizer it plugs into `keras_hub.models.CausalLMPreprocessor`
and is saved inside a `.keras` file with its vocabulary. `train_tokenizer`
builds either it or a keras-hub `WordPieceTokenizer` from a corpus.
"""

import keras
import keras_hub
import numpy as np

PAD_TOKEN = "<pad>"
UNKNOWN_TOKEN = "<unk>"
TOKENIZER_KINDS = ("character", "wordpiece")


@keras.saving.register_keras_serializable(package="zoo")
class CharacterTokenizer(keras_hub.tokenizers.Tokenizer):
    """Text <-> one id per character, with a fixed vocabulary.

    Ids 0 and 1 are the padding and unknown tokens; characters not in the
    vocabulary map to the unknown id (and come back as U+FFFD). An optional
    end token (e.g. `"<eos>"`) lets generation stop. Runs in plain Python
    when called directly (every Keras backend), and with TensorFlow ops
    inside `tf.data` / `tf.function`, giving the same ids, so a model's
    `fit`, `evaluate` and `predict` take raw strings.

    Args:
        vocabulary: list of tokens. Special tokens (`pad_token`,
            `unknown_token`, `end_token`) must be in it; every other entry
            must be a single character. Use `CharacterTokenizer.from_text`
            to build one from a corpus.
        pad_token, unknown_token: names of the padding and unknown tokens.
        end_token: optional end-of-text token; None for none.

    Call arguments:
        inputs: a string, or a list / 1-D array of strings.

    Returns:
        A list of ids (int) for a string, or a list of such lists.

    Example:

    >>> tokenizer = CharacterTokenizer.from_text("hello world")
    >>> ids = tokenizer("hello")
    >>> tokenizer.detokenize(ids)
    'hello'
    """

    def __init__(
        self,
        vocabulary=None,
        pad_token=PAD_TOKEN,
        unknown_token=UNKNOWN_TOKEN,
        end_token=None,
        **kwargs,
    ):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        self.pad_token = pad_token
        self.unknown_token = unknown_token
        self.end_token = end_token
        self._add_special_token(pad_token, "pad_token")
        self._add_special_token(unknown_token, "unknown_token")
        if end_token is not None:
            self._add_special_token(end_token, "end_token")
        else:
            self.end_token_id = None
        # The causal-LM preprocessor reads these; characters have no start.
        self.start_token_id = None
        self.set_vocabulary(vocabulary)

    @classmethod
    def from_text(cls, text, end_token=None, **kwargs):
        """A tokenizer whose vocabulary is the sorted characters of `text`."""
        specials = [PAD_TOKEN, UNKNOWN_TOKEN]
        if end_token is not None:
            specials.append(end_token)
        return cls(specials + sorted(set(text)), end_token=end_token, **kwargs)

    def set_vocabulary(self, vocabulary):
        if vocabulary is None:
            self.vocabulary = None
            return
        vocabulary = [str(token) for token in vocabulary]
        if len(set(vocabulary)) != len(vocabulary):
            raise ValueError("The vocabulary has repeated tokens.")
        specials = set(self.special_tokens)
        for token in vocabulary:
            if token not in specials and len(token) != 1:
                raise ValueError(
                    "CharacterTokenizer entries must be single characters "
                    f"or special tokens; got {token!r}."
                )
        self.vocabulary = vocabulary
        self._token_to_id = {token: i for i, token in enumerate(vocabulary)}
        self._update_special_token_ids()
        # Lookup table for whole-array encoding of characters below U+10000.
        self._id_of_code = np.full(
            0x10000, self.unknown_token_id, dtype="int32"
        )
        for token, i in self._token_to_id.items():
            if len(token) == 1 and ord(token) < 0x10000:
                if token not in specials:
                    self._id_of_code[ord(token)] = i

    def _check_vocabulary(self):
        if self.vocabulary is None:
            raise ValueError(
                "No vocabulary has been set for CharacterTokenizer; pass "
                "`vocabulary=` or use `CharacterTokenizer.from_text(text)`."
            )

    def get_vocabulary(self):
        self._check_vocabulary()
        return list(self.vocabulary)

    def vocabulary_size(self):
        self._check_vocabulary()
        return len(self.vocabulary)

    def id_to_token(self, id):
        self._check_vocabulary()
        if not 0 <= int(id) < len(self.vocabulary):
            raise ValueError(
                f"Token id {id} is outside the vocabulary "
                f"[0, {len(self.vocabulary)})."
            )
        return self.vocabulary[int(id)]

    def token_to_id(self, token):
        self._check_vocabulary()
        return self._token_to_id.get(token, self.unknown_token_id)

    def encode_text(self, text):
        """A whole corpus -> a 1-D int32 NumPy array (fast path for data)."""
        self._check_vocabulary()
        codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
        ids = np.full(codes.shape, self.unknown_token_id, dtype="int32")
        small = codes < 0x10000
        ids[small] = self._id_of_code[codes[small]]
        return ids

    def tokenize(self, inputs):
        self._check_vocabulary()
        if self._use_tf_workflow():
            return self._tokenize_in_graph(inputs)
        texts, batched = _as_python_strings(inputs)
        lookup = self._token_to_id
        unknown = self.unknown_token_id
        ids = [[lookup.get(ch, unknown) for ch in text] for text in texts]
        return ids if batched else ids[0]

    def _tokenize_in_graph(self, inputs):
        """The same ids with TensorFlow ops, for `tf.data` pipelines (what
        `fit`, `evaluate` and `predict` on strings run): a `(batch, None)`
        ragged tensor for a batch of strings, `(None,)` for one string."""
        import tensorflow as tf  # data pipelines may use tf (zoo/data only)

        inputs = tf.convert_to_tensor(inputs, dtype=tf.string)
        if inputs.shape.rank not in (0, 1):
            raise ValueError(
                "Expected a string or a 1-D batch of strings; got an input "
                f"of rank {inputs.shape.rank}."
            )
        codes = tf.strings.unicode_decode(inputs, "UTF-8", errors="replace")
        table = tf.constant(self._id_of_code)
        unknown = tf.constant(self.unknown_token_id, tf.int32)

        def lookup(flat_codes):
            # Characters above U+FFFF are never in the table: unknown, as
            # the Python path gives for characters not in the vocabulary.
            in_table = flat_codes < table.shape[0]
            ids = tf.gather(table, tf.where(in_table, flat_codes, 0))
            return tf.where(in_table, ids, unknown)

        if isinstance(codes, tf.RaggedTensor):
            return tf.ragged.map_flat_values(lookup, codes)
        return lookup(codes)

    def detokenize(self, inputs):
        self._check_vocabulary()
        if self._use_tf_workflow():
            return self._detokenize_in_graph(inputs)
        sequences, batched = _as_python_ids(inputs)
        size = len(self.vocabulary)
        texts = []
        for ids in sequences:
            chars = []
            for i in ids:
                if not 0 <= i < size:
                    raise ValueError(
                        f"Token id {i} is outside the vocabulary [0, {size})."
                    )
                if i == self.pad_token_id:
                    continue
                if i == self.unknown_token_id:
                    chars.append("\ufffd")
                elif i == self.end_token_id:
                    continue
                else:
                    chars.append(self.vocabulary[i])
            texts.append("".join(chars))
        return texts if batched else texts[0]

    def _detokenize_in_graph(self, inputs):
        """`detokenize` with TensorFlow ops (inside `tf.function`, e.g. an
        exported `generate` signature): `(batch, None)` ids (ragged or
        dense) -> `(batch,)` strings; `(None,)` -> one string. Padding and
        end tokens give nothing, the unknown token U+FFFD."""
        import tensorflow as tf  # data pipelines may use tf (zoo/data only)

        pieces = list(self.vocabulary)
        for token_id in (self.pad_token_id, self.end_token_id):
            if token_id is not None:
                pieces[token_id] = ""
        pieces[self.unknown_token_id] = "\ufffd"
        table = tf.constant(pieces)
        if isinstance(inputs, (list, tuple)):
            inputs = tf.ragged.constant(inputs)
        inputs = tf.cast(inputs, tf.int32)
        if isinstance(inputs, tf.RaggedTensor):
            strings = tf.ragged.map_flat_values(tf.gather, table, inputs)
        else:
            strings = tf.gather(table, inputs)
        return tf.strings.reduce_join(strings, axis=-1)

    def call(self, inputs, *args, training=None, **kwargs):
        return self.tokenize(inputs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary": self.vocabulary,
                "pad_token": self.pad_token,
                "unknown_token": self.unknown_token,
                "end_token": self.end_token,
            }
        )
        return config


def _as_python_strings(inputs):
    """str | bytes | list | array -> (list of str, batched?)."""
    if isinstance(inputs, (str, bytes)):
        inputs, batched = [inputs], False
    else:
        inputs = np.asarray(inputs, dtype=object)
        if inputs.ndim == 0:
            inputs, batched = [inputs.item()], False
        elif inputs.ndim == 1:
            inputs, batched = list(inputs), True
        else:
            raise ValueError(
                "Expected a string or a 1-D list of strings; got an input of "
                f"rank {inputs.ndim}."
            )
    return [
        x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in inputs
    ], batched


def _as_python_ids(inputs):
    """ids (list, ragged list, array, tensor) -> (list of lists, batched?)."""
    if not isinstance(inputs, (list, tuple)):
        inputs = keras.ops.convert_to_numpy(inputs)
        if inputs.ndim == 1:
            return [inputs.tolist()], False
        if inputs.ndim != 2:
            raise ValueError(
                f"Expected ids of rank 1 or 2; got rank {inputs.ndim}."
            )
        return inputs.tolist(), True
    if len(inputs) and not np.isscalar(inputs[0]):
        return [
            [int(i) for i in np.asarray(row).reshape(-1)] for row in inputs
        ], True
    return [[int(i) for i in inputs]], False


def train_tokenizer(text, kind="character", vocabulary_size=2000):
    """A tokenizer fitted to a corpus.

    Args:
        text: the training text (one string).
        kind: "character" (`CharacterTokenizer`) or "wordpiece" (a keras-hub
            `WordPieceTokenizer`, vocabulary computed by keras-hub).
        vocabulary_size: size of the wordpiece vocabulary.
    """
    if kind == "character":
        return CharacterTokenizer.from_text(text)
    if kind == "wordpiece":
        import tensorflow as tf  # keras-hub's vocabulary trainer reads tf.data

        lines = [line for line in text.split("\n") if line.strip()]
        # A list of strings would be read as file names; a dataset is data.
        vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
            tf.data.Dataset.from_tensor_slices(lines).batch(1000),
            vocabulary_size,
            lowercase=False,
            reserved_tokens=["[PAD]", "[UNK]"],
        )
        return keras_hub.tokenizers.WordPieceTokenizer(
            vocabulary=vocabulary,
            lowercase=False,
            oov_token="[UNK]",
            dtype="int32",
        )
    raise ValueError(f"kind must be one of {TOKENIZER_KINDS}; got {kind!r}.")


def encode_corpus(tokenizer, text):
    """A whole corpus -> one 1-D int32 NumPy array of token ids."""
    if isinstance(tokenizer, CharacterTokenizer):
        return tokenizer.encode_text(text)
    ids = []
    for line in text.split("\n"):
        if line.strip():
            ids.extend(np.asarray(tokenizer.tokenize(line)).tolist())
    return np.asarray(ids, dtype="int32")


@keras.saving.register_keras_serializable(package="zoo")
class SubwordTokenizer(keras_hub.tokenizers.SentencePieceTokenizer):
    """keras-hub's `SentencePieceTokenizer` with the special tokens a
    sequence-to-sequence preprocessor packs: `<pad>` (id 0), `<unk>`,
    `<s>` (start) and `</s>` (end), as `train_subword_tokenizer` lays them
    out. Detokenising restores the text's case, accents and single spaces
    between words (SentencePiece keeps spaces as `▁`; it folds runs of
    spaces into one and drops leading and trailing ones), so generated
    text needs no post-processing before BLEU.

    Args:
        proto: a SentencePiece model (bytes or a file path) with those four
            pieces.
        **kwargs: the rest of `keras_hub.tokenizers.SentencePieceTokenizer`'s
            arguments.

    Call arguments:
        inputs: a string or a batch of strings.

    Returns:
        Token ids: a list for a string, a list of lists (or a ragged tensor
        inside `tf.data`) for a batch.

    Example:

    >>> tokenizer = train_subword_tokenizer(["Zwei Hunde spielen.", ...], 100)
    >>> tokenizer.detokenize(tokenizer("Zwei Hunde spielen."))
    'Zwei Hunde spielen.'
    """

    def __init__(self, proto=None, **kwargs):
        self._add_special_token("<pad>", "pad_token")
        self._add_special_token("<unk>", "unknown_token")
        self._add_special_token("<s>", "start_token")
        self._add_special_token("</s>", "end_token")
        kwargs.setdefault("dtype", "int32")
        super().__init__(proto=proto, **kwargs)


def train_subword_tokenizer(texts, vocabulary_size, model_type="unigram"):
    """A `SubwordTokenizer` learned on `texts` with SentencePiece.

    keras-hub's `compute_sentence_piece_proto` gives SentencePiece's default
    ids (no padding piece); this trains the same model with the ids the
    seq2seq preprocessor needs: 0 `<pad>`, 1 `<unk>`, 2 `<s>`, 3 `</s>`.
    Characters are covered fully (`character_coverage=1.0`), so umlauts and
    ß are pieces of their own; a character never seen maps to `<unk>`.

    Args:
        texts: training sentences (both languages for a shared vocabulary).
        vocabulary_size: number of pieces, the four special ones included.
        model_type: "unigram" or "bpe".
    """
    import io

    import sentencepiece

    texts = [str(t) for t in texts if str(t).strip()]
    if not texts:
        raise ValueError("train_subword_tokenizer needs some text.")
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        vocab_size=int(vocabulary_size),
        model_type=model_type,
        character_coverage=1.0,
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        pad_piece="<pad>",
        unk_piece="<unk>",
        bos_piece="<s>",
        eos_piece="</s>",
        hard_vocab_limit=False,
        minloglevel=2,
    )
    return SubwordTokenizer(proto=model.getvalue())


BERT_SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_bert_tokenizer(texts, vocabulary_size, lowercase=True):
    """A WordPiece `keras_hub.models.BertTokenizer` learned on `texts`.

    The vocabulary comes from keras-hub's `compute_word_piece_vocabulary`
    (lower-cased and accent-stripped when `lowercase`); `<br />` tags are
    dropped first. Ids: 0 [PAD], 1 [UNK], 2 [CLS], 3 [SEP], 4 [MASK], then
    the learned pieces. A word the vocabulary cannot spell is [UNK].

    Args:
        texts: the training text (a list of strings); never evaluation text.
        vocabulary_size: pieces wanted, the five special tokens included
            (WordPiece may return a few fewer).
        lowercase: lower-case and strip accents (an uncased BERT).

    Returns:
        A `keras_hub.models.BertTokenizer` (saved inside any `.keras` file of
        a model whose preprocessor holds it).

    Example (a tiny corpus: its pieces are mostly single letters):

    >>> reviews = ["A wonderful film, a wonderful cast.",
    ...            "A dull film.<br />Far too long."]
    >>> tokenizer = train_bert_tokenizer(reviews, vocabulary_size=40)
    >>> tokenizer.vocabulary_size(), tokenizer.get_vocabulary()[:8]
    (40, ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', ',', '.', 'a'])
    >>> tokenizer.detokenize(tokenizer("A wonderful film"))
    'a wonderful film'
    >>> tokenizer.detokenize(tokenizer("a zebra"))  # no "z" to spell it
    'a [UNK]'
    """
    import re

    from zoo._tensorflow import tf

    texts = [re.sub(r"<br\s*/?>", " ", str(t)) for t in texts]
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise ValueError("train_bert_tokenizer needs some text.")
    if int(vocabulary_size) <= len(BERT_SPECIAL_TOKENS):
        raise ValueError(
            f"vocabulary_size={vocabulary_size} leaves no room beside the "
            f"{len(BERT_SPECIAL_TOKENS)} special tokens."
        )
    vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
        tf.data.Dataset.from_tensor_slices(texts).batch(1024),
        vocabulary_size=int(vocabulary_size),
        lowercase=lowercase,
        strip_accents=lowercase,
        reserved_tokens=BERT_SPECIAL_TOKENS,
    )
    return bert_tokenizer(vocabulary, lowercase=lowercase)


def bert_tokenizer(vocabulary, lowercase=True):
    """The WordPiece `keras_hub.models.BertTokenizer` of a vocabulary, set
    up as `train_bert_tokenizer` sets up the one it learns: a vocabulary
    read back from a file gives the same ids.

    Args:
        vocabulary: the pieces, one per id (`tokenizer.get_vocabulary()`),
            [PAD], [UNK], [CLS], [SEP] and [MASK] among them.
        lowercase: lower-case and strip accents (an uncased BERT).

    Returns:
        A `keras_hub.models.BertTokenizer`; "[MASK]" typed in a text is the
        mask token (`fill_mask` reads it).

    Example:

    >>> tokenizer = bert_tokenizer(BERT_SPECIAL_TOKENS + ["a", "good", "film"])
    >>> tokenizer("A good [MASK]").tolist()
    [5, 6, 4]
    """
    return keras_hub.models.BertTokenizer(
        vocabulary=list(vocabulary),
        lowercase=lowercase,
        strip_accents=lowercase,
        special_tokens_in_strings=True,
    )
