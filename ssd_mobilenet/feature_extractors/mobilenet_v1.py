"""slim's `mobilenet_v1_base`, the base of every feature extractor here (TF1 variable scope
`FeatureExtractor/MobilenetV1/`, ops one `MobilenetV1` deeper: slim opens the name scope twice).

Layer i is `Conv2d_0` (a 3x3 conv) or `Conv2d_<i>_depthwise` (3x3 depthwise) then
`Conv2d_<i>_pointwise` (1x1); each conv -> BN -> ReLU6. Depths scale by the depth multiplier
and stop at `min_depth` (`SSDConfig.depth`).
"""

from __future__ import annotations

from ssd_mobilenet.layers import PadToMultiple, SlimConv

# slim's MOBILENETV1_CONV_DEFS: (layer index, kind, stride, depth at multiplier 1); kernel 3 throughout.
MOBILENET_V1_BLOCKS = (
    (0, "conv", 2, 32),
    (1, "sep", 1, 64),
    (2, "sep", 2, 128),
    (3, "sep", 1, 128),
    (4, "sep", 2, 256),
    (5, "sep", 1, 256),
    (6, "sep", 2, 512),
    (7, "sep", 1, 512),
    (8, "sep", 1, 512),
    (9, "sep", 1, 512),
    (10, "sep", 1, 512),
    (11, "sep", 1, 512),
    (12, "sep", 2, 1024),
    (13, "sep", 1, 1024),
)
# Where `SSDMobileNetV1.split` cuts by default: the end of the 150x150 and 75x75 layers (at
# 300x300; per image Conv2d_1_pointwise alone is 150*150*64 floats = 5.8 MB) and the first 38x38
# block; Conv2d_5_pointwise's output is 38*38*256 floats = 1.5 MB per image.
STEM_END = "Conv2d_5_pointwise"


def output_layer(block) -> str:
    """The layer whose output is block `block`'s (`Conv2d_0`, else its pointwise conv)."""
    i, kind, _, _ = block
    return f"Conv2d_{i}" if kind == "conv" else f"Conv2d_{i}_pointwise"


def padded_size(config) -> tuple:
    """The image size the base sees: the config's, zero-padded to `pad_to_multiple`."""
    up = lambda s: -(-s // config.pad_to_multiple) * config.pad_to_multiple  # noqa: E731
    return up(config.image_height), up(config.image_width)


def output_shapes(config, blocks=MOBILENET_V1_BLOCKS) -> dict:
    """{output layer: (H, W)} of every block, without building layers: each stride-2 conv halves
    a size rounding up (SAME, or explicit padding then VALID, give the same for kernel 3)."""
    h, w = padded_size(config)
    shapes = {}
    for block in blocks:
        stride = block[2]
        h, w = -(-h // stride), -(-w // stride)
        shapes[output_layer(block)] = (h, w)
    return shapes


def build_base(x, config, endpoints: dict, fold_batch_norm: bool = False, blocks=MOBILENET_V1_BLOCKS,
               final_layer: str = "Conv2d_13_pointwise"):
    """Applies the base to the preprocessed image up to `final_layer` (a block's output layer).

    Args:
      x: float32 [N, H, W, 3] in [-1, 1] (a Keras tensor); zero-padded at the bottom/right to a
        multiple of `config.pad_to_multiple` first, inside the feature extractor as in TF1.
      endpoints: filled with every layer's output, keyed by its scope (= its layer name).
      fold_batch_norm: conv -> bias -> ReLU6 layers, for weights with batch norm folded in.
      blocks: the conv defs (FPN with `use_depthwise` changes the last two).
    Returns:
      the output of `final_layer`.
    """
    base = dict(explicit_padding=config.use_explicit_padding, bn_epsilon=config.base_batch_norm_epsilon,
                fused_batch_norm=config.fused_batch_norm, batch_norm=not fold_batch_norm,
                weight_bits=config.weight_bits, activation_bits=config.activation_bits)

    def apply(layer, net):
        net = layer(net)
        endpoints[layer.name] = net
        return net

    net = x
    if config.pad_to_multiple > 1:
        # Inside the feature extractor, as in TF1: the Preprocessor output stays unpadded.
        net = PadToMultiple(config.pad_to_multiple, name="pad_to_multiple")(net)
    for block in blocks:
        i, kind, stride, depth = block
        if kind == "conv":
            net = apply(SlimConv(config.depth(depth), 3, stride, name=f"Conv2d_{i}", **base), net)
        else:
            net = apply(SlimConv(None, 3, stride, depthwise=True, name=f"Conv2d_{i}_depthwise", **base), net)
            net = apply(SlimConv(config.depth(depth), 1, 1, name=f"Conv2d_{i}_pointwise", **base), net)
        if output_layer(block) == final_layer:
            return net
    raise ValueError(f"{final_layer} is not a MobileNet v1 block's output")


def unused_blocks(final_layer: str, blocks=MOBILENET_V1_BLOCKS) -> list:
    """Scope prefixes (`Conv2d_12_`, ...) of the blocks after `final_layer`: slim builds the base up to
    Conv2d_13_pointwise whatever the feature extractor taps, so a checkpoint holds their weights;
    a frozen graph prunes them, and the Keras model does not build them."""
    names = [output_layer(b) for b in blocks]
    return [f"Conv2d_{b[0]}_" if b[1] == "sep" else f"Conv2d_{b[0]}/"
            for b in blocks[names.index(final_layer) + 1:]]
