"""The linear probe: how much of a frozen model's representation is
linearly readable (Chen et al. 2020, section 3.3): one `Dense` softmax
layer trained on fixed features, its accuracy on held-out examples."""

import keras
import numpy as np


def _checked(features, labels, name):
    features = np.asarray(features, "float32")
    labels = np.asarray(labels)
    if features.ndim != 2 or not len(features):
        raise ValueError(
            f"{name} features must be a non-empty (examples, dim) array; got "
            f"shape {features.shape}."
        )
    if labels.shape != (len(features),):
        raise ValueError(
            f"{name} labels must be one class id per example, shape "
            f"({len(features)},); got {labels.shape}."
        )
    if not np.isfinite(features).all():
        raise ValueError(f"{name} features hold NaN or infinite values.")
    return features, labels.astype("int32")


def linear_probe(
    train_features,
    train_labels,
    validation_features,
    validation_labels,
    num_classes=None,
    steps=2000,
    batch_size=256,
    learning_rate=1e-2,
    l2=1e-4,
    seed=0,
):
    """Trains a linear classifier (standardised features, one `Dense`
    softmax layer, L2 on its kernel, Adam) on fixed features and measures
    it on the validation ones.

    Args:
        train_features, validation_features: `(examples, dim)` arrays,
            e.g. `ImageGPTCausalLM.features(images)`, or raw pixels
            flattened (the baseline the probe is read against).
        train_labels, validation_labels: class ids `(examples,)`.
        num_classes: default: one more than the largest label seen.
        steps, batch_size, learning_rate, l2: the classifier's training
            (about `steps` batches, the examples reshuffled each pass).
        seed: the weights' and the shuffling's seed.

    Returns:
        `{"accuracy": validation accuracy, "train_accuracy": ...,
        "dim": feature size}`.

    Example:

    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(200, 4)); y = (x[:, 0] > 0).astype("int32")
    >>> linear_probe(x[:150], y[:150], x[150:], y[150:])["accuracy"] > 0.9
    True
    """
    x, y = _checked(train_features, train_labels, "training")
    x_val, y_val = _checked(
        validation_features, validation_labels, "validation"
    )
    if x.shape[1] != x_val.shape[1]:
        raise ValueError(
            f"training features have {x.shape[1]} dimensions, validation "
            f"features {x_val.shape[1]}."
        )
    if num_classes is None:
        num_classes = int(max(y.max(), y_val.max())) + 1
    keras.utils.set_random_seed(seed)
    # A feature constant over the training set (a border pixel that is
    # black in every digit) is centred, not scaled: dividing by a tiny
    # spread would blow up its value in a validation example.
    mean, std = x.mean(0), x.std(0)
    std = np.where(std > 1e-6, std, 1.0)
    classifier = keras.Sequential(
        [
            keras.Input((x.shape[1],)),
            keras.layers.Dense(
                num_classes,
                activation="softmax",
                kernel_regularizer=keras.regularizers.L2(l2),
            ),
        ]
    )
    classifier.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    x_train = (x - mean) / std
    batch_size = min(batch_size, len(x))
    per_pass = -(-len(x) // batch_size)
    if per_pass >= 8:  # epochs of reshuffled examples
        classifier.fit(
            x_train,
            y,
            epochs=-(-steps // per_pass),
            batch_size=batch_size,
            shuffle=True,
            verbose=0,
        )
    else:
        # A small set: `steps` batches in one epoch of fresh permutations,
        # one after the other (an epoch per step would cost more than it).
        rng = np.random.default_rng(seed)
        passes = -(-steps * batch_size // len(x))
        order = np.concatenate([rng.permutation(len(x)) for _ in range(passes)])
        order = order[: steps * batch_size]
        classifier.fit(
            x_train[order],
            y[order],
            epochs=1,
            batch_size=batch_size,
            shuffle=False,
            verbose=0,
        )

    def accuracy(features, labels):
        scores = classifier.predict((features - mean) / std, verbose=0)
        return float(np.mean(np.argmax(scores, -1) == labels))

    return {
        "accuracy": accuracy(x_val, y_val),
        "train_accuracy": accuracy(x, y),
        "dim": int(x.shape[1]),
    }
