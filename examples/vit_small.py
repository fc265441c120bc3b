"""A small vision transformer for 32 px images: torchvision's VisionTransformer, sized for a CPU.

The CPU's `vit` workload (python -m bench --workload vit): 6 encoder blocks 192 wide with 3 heads (ViT-Tiny's width,
half its depth) over 4x4 patches, so 64 patches and a class token; about 2.7 million parameters. Trained as ViTs are
(--optimizer adamw: AdamW with weight decay, the learning rate warmed up). On a GPU the workload is vit_b_16 at 224 px.

    python train.py --model examples/vit_small.py:vit_small --optimizer adamw
"""

import torchvision


def vit_small(num_classes):
    return torchvision.models.VisionTransformer(
        image_size=32, patch_size=4, num_layers=6, num_heads=3, hidden_dim=192, mlp_dim=768, num_classes=num_classes
    )
