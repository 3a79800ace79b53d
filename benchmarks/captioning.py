"""Captioning speed: captions per second per backend, greedy and beam, in
one run.

    python benchmarks/captioning.py --data-dir ../shared/data/flickr8k
    KERAS_BACKEND=jax python benchmarks/captioning.py --backends current

For each backend (a fresh process each) a captioner (by default the shipped
`saved_models/caption_flickr8k.keras`; `--preset NAME` builds an untrained
one of that preset instead, with random encoder weights) captions
`--images` images (Flickr8k dev images from `--data-dir`; random pixels
without it) in batches of `--batch-size`, from raw uint8 images: the
preprocessor, the image encoder (once per image) and the decoder (one
step per word, its attention over the grid computed from the cached
image side):

* greedy and beam search (`--beam` beams, GNMT length penalty 0.6);
* the encoder alone (`encode_images`), which shows its share;
* cached decoding against `generate(use_cache=False)` (greedy: the whole
  caption prefix recomputed per step), whose captions must be the same.

Every configuration is compiled (jit on JAX, XLA tf.function on TensorFlow;
PyTorch runs eagerly under no_grad) and warmed up on one batch before the
timed pass. Under PyTorch, greedy and beam search run once more with
`compile(jit_compile=True)`, which compiles the one-word decode step with
`torch.compile` (`--no-torch-compile` skips them). Timings are only
compared within one run on one machine.
"""

import os
import sys
import time

from zoo.testing.benchmarks import (
    benchmark_parser,
    print_compiled_decoding,
    print_result,
    run_worker,
    selected_backends,
    write_results,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DEFAULT_MODEL = os.path.join(ROOT, "saved_models", "caption_flickr8k.keras")


def parse_args(argv=None):
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, help="a saved ImageCaptioner (.keras)"
    )
    parser.add_argument(
        "--preset",
        default=None,
        help="instead of --model: an untrained captioner of "
        "this zoo.models.captioning preset",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="Flickr8k folder; its dev images are captioned "
        "(default: random pixels)",
    )
    parser.add_argument(
        "--images", type=int, default=128, help="how many images"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beam", type=int, default=3)
    parser.add_argument(
        "--no-torch-compile",
        dest="torch_compile",
        action="store_false",
        help="PyTorch: skip the runs with the decode step "
        "compiled (compile(jit_compile=True))",
    )
    parser.add_argument("--json", default=None, help="write results here")
    args = parser.parse_args(argv)
    if args.images < 1 or args.batch_size < 1 or args.beam < 2:
        parser.error("--images and --batch-size must be >= 1, --beam >= 2")
    return args


def load_captioner(args):
    import keras

    import zoo  # noqa: F401  (registers the zoo classes)
    from zoo.data.captions import make_synthetic_captions
    from zoo.data.tokenizers import train_subword_tokenizer
    from zoo.models.captioning import (
        PRESETS,
        ImageCaptioner,
        ImageCaptionerPreprocessor,
        image_encoder_from_config,
    )
    from zoo.saving import load_model

    if args.preset is None:
        if not os.path.exists(args.model):
            raise SystemExit(
                f"error: no model at {args.model}; train one "
                "with recipes/caption_images.py or pass "
                "--preset"
            )
        return (
            load_model(args.model, expected=ImageCaptioner),
            os.path.basename(args.model),
        )
    keras.utils.set_random_seed(0)
    _, captions = make_synthetic_captions(200, seed=0)
    tokenizer = train_subword_tokenizer(
        [c for options in captions for c in options],
        PRESETS.part(args.preset, "tokenizer")["vocabulary_size"],
        model_type="word",
    )
    preprocessor = ImageCaptionerPreprocessor.from_preset(
        args.preset, tokenizer=tokenizer
    )
    encoder = image_encoder_from_config(
        PRESETS.part(args.preset, "backbone")["image_encoder"],
        pretrained=False,
    )
    return (
        ImageCaptioner.from_preset(
            args.preset,
            preprocessor=preprocessor,
            backbone_image_encoder=encoder,
        ),
        f"untrained {args.preset}",
    )


def images_for(args, captioner):
    import numpy as np

    size = captioner.preprocessor.image_size
    channels = captioner.preprocessor.num_channels
    if args.data_dir is not None:
        from zoo.data.flickr8k import load_flickr8k

        split = load_flickr8k(
            args.data_dir, image_size=size, splits=["dev"], limit=args.images
        )["dev"]
        return split.images
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (args.images, *size, channels), "uint8")
    return images if channels > 1 else images[..., 0]


def measure(args):
    """Runs in a process whose backend is already chosen."""
    import keras

    captioner, name = load_captioner(args)
    images = images_for(args, captioner)
    batches = [
        images[i : i + args.batch_size]
        for i in range(0, len(images), args.batch_size)
    ]
    result = {
        "backend": keras.backend.backend(),
        "model": name,
        "parameters": int(captioner.count_params()),
        "encoder_parameters": int(
            captioner.backbone.image_encoder.count_params()
        ),
        "images": len(images),
        "batch_size": args.batch_size,
        "beam": args.beam,
    }
    outputs = {}
    searches = (
        ("greedy", {"sampler": "greedy"}),
        ("greedy_recomputed", {"sampler": "greedy", "use_cache": False}),
        (
            f"beam{args.beam}",
            {"sampler": "beam", "num_beams": args.beam, "length_penalty": 0.6},
        ),
    )
    for search, options in searches:
        result[search], outputs[search] = timed(
            lambda batch, o=options: captioner.generate(
                batch, batch_size=args.batch_size, **o
            ),
            batches,
            len(images),
        )
    if keras.backend.backend() == "torch" and args.torch_compile:
        # The decode step under torch.compile, as users ask for it.
        captioner.compile(jit_compile=True)
        for search, options in searches[::2]:  # greedy and beam
            timing, out = timed(
                lambda batch, o=options: captioner.generate(
                    batch, batch_size=args.batch_size, **o
                ),
                batches,
                len(images),
            )
            result[f"{search}_compiled"] = {
                **timing,
                "same_output": out == outputs[search],
                "compiled_over_eager": round(
                    result[search]["seconds"] / timing["seconds"], 2
                ),
            }
    result["encoder"], _ = timed(
        lambda batch: [
            captioner.encode_images(batch, batch_size=args.batch_size)
        ],
        batches,
        len(images),
    )
    result["same_greedy_output"] = (
        outputs["greedy"] == outputs["greedy_recomputed"]
    )
    result["distinct_greedy_captions"] = len(set(outputs["greedy"]))
    result["example"] = outputs["greedy"][0]
    return result


def timed(function, batches, count):
    """(timing, outputs) of `function` over `batches`, after one untimed
    call per batch shape (which compiles for it)."""
    start = time.perf_counter()
    for batch in {len(b): b for b in batches}.values():
        function(batch)
    first = time.perf_counter() - start
    start = time.perf_counter()
    out = []
    for batch in batches:
        out += list(function(batch))
    seconds = time.perf_counter() - start
    return {
        "warm_up_seconds": round(first, 3),
        "seconds": round(seconds, 3),
        "images_per_second": round(count / seconds, 2),
    }, out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        print_result(measure(args))
        return None
    beam = f"beam{args.beam}"
    results = []
    for index, backend in enumerate(selected_backends(args.backends)):
        # Workers get the same flags; only this process writes --json.
        r = run_worker(__file__, backend, argv)
        results.append(r)
        if index == 0:
            print(
                f"{r['model']} ({r['parameters'] / 1e6:.2f}M parameters, "
                f"{r['encoder_parameters'] / 1e6:.2f}M in the encoder): "
                f"{r['images']} images, batches of {r['batch_size']}; "
                "captions (or encodings) per second"
            )
            print(
                f"{'backend':<11} {'greedy':>8} {'recomp.':>8} "
                f"{beam:>8} {'encoder':>8} | same greedy"
            )
        print(
            f"{backend:<11} {r['greedy']['images_per_second']:>8.2f} "
            f"{r['greedy_recomputed']['images_per_second']:>8.2f} "
            f"{r[beam]['images_per_second']:>8.2f} "
            f"{r['encoder']['images_per_second']:>8.2f} | "
            f"{r['same_greedy_output']}",
            flush=True,
        )
        print_compiled_decoding(
            backend, r, ("greedy", beam), "images_per_second", "captions/s"
        )
    print(
        "greedy and beam: generate() from raw uint8 images, the decoder's "
        "cache on; recomp.: generate(use_cache=False); encoder: "
        "encode_images() alone"
    )
    write_results(args, results)
    return results


if __name__ == "__main__":
    main()
