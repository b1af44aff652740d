"""The numbers the paper of chapter 2b reports, as data with their source.

Shown beside the chapter's own measurements, never used as "ours".
"""

from __future__ import annotations

from symlib.book.reference import ReportedTable, lookup

__all__ = ["REPORTED", "reported"]

_LAURENT_COLS = ("modes", "method", "MMD", "NS", "Acc", "ECE", "Brier", "AUPR", "FPR95", "IDMI", "OODMI")
_LAURENT_B4_COLS = ("modes", "method", "MMD median", "MMD mean", "MMD max", "NS median", "NS mean", "NS max")

REPORTED: dict[str, ReportedTable] = {
    "laurent2024/table1_mnist": ReportedTable(
        "laurent2024",
        "Table 1 (Sec. 4), MNIST / OptuNet",
        _LAURENT_COLS,
        (
            ("one", "Dropout", 15.0, 14.3, 83.3, 33.4, 26.1, 96.4, 98.6, 26.1, 22.2),
            ("one", "BNN", 18.8, 17.1, 78.1, 7.4, 30.9, 67.9, 93.7, 0.1, 0.1),
            ("one", "SGHMC", 16.7, 17.7, 95.1, 7.6, 2.8, 73.7, 98.4, 4.3, 14.5),
            ("one", "SWAG", 16.0, 14.6, 88.3, 17.7, 4.9, 73.4, 68.6, 4.0, 8.7),
            ("one", "Laplace", 10.6, 9.5, 87.9, 18.1, 4.8, 48.2, 74.6, 6.2, 5.9),
            ("multi", "Dropout", 2.1, 2.1, 92.1, 29.2, 36.8, 97.2, 78.2, 36.6, 52.5),
            ("multi", "BNN", 2.8, 2.5, 86.5, 17.5, 24.4, 96.9, 27.2, 21.1, 52.3),
            ("multi", "SWAG", 1.8, 1.3, 95.0, 13.1, 17.5, 88.7, 24.6, 27.6, 62.2),
            ("multi", "Laplace", 1.8, 0.8, 94.8, 12.8, 15.8, 95.4, 32.1, 21.1, 52.2),
            ("multi", "DE", 0.0, 0.0, 95.3, 10.7, 13.5, 95.7, 12.8, 19.3, 62.6),
        ),
    ),
    "laurent2024/table1_cifar100": ReportedTable(
        "laurent2024",
        "Table 1 (Sec. 4), CIFAR-100 / ResNet-18 (OOD: SVHN)",
        _LAURENT_COLS,
        (
            ('one', 'Dropout', 4.5, 7.5, 69.3, 12.1, 44.3, 80.1, 64.0, 6.0, 9.6),
            ('one', 'BNN', 9.0, 10.2, 57.6, 21.8, 62.5, 81.7, 62.6, 0.8, 2.2),
            ('one', 'SGHMC', 7.5, 7.9, 69.3, 4.3, 41.5, 87.5, 41.4, 0.0, 0.1),
            ('one', 'SWAG', 6.7, 7.2, 66.7, 1.7, 43.8, 30.7, 17.1, 2.7, 14.7),
            ('one', 'Laplace', 5.7, 7.0, 70.7, 1.4, 40.0, 84.5, 40.6, 31.3, 70.6),
            ('multi', 'Dropout', 0.7, 4.5, 75.5, 4.8, 64.2, 93.5, 23.7, 23.8, 77.0),
            ('multi', 'BNN', 6.1, 5.6, 66.3, 1.3, 45.6, 91.0, 30.9, 44.5, 110.4),
            ('multi', 'SWAG', 5.0, 5.4, 68.4, 2.3, 42.1, 97.9, 17.1, 7.5, 33.0),
            ('multi', 'Laplace', 0.6, 4.3, 75.2, 7.8, 35.2, 95.1, 20.1, 50.5, 128.3),
            ('multi', 'DE', 0.0, 0.0, 75.9, 2.3, 33.3, 97.1, 16.1, 26.5, 90.1),
        ),
    ),
    "laurent2024/table1_tinyimagenet": ReportedTable(
        "laurent2024",
        "Table 1 (Sec. 4), TinyImageNet / ResNet-18 (OOD: Textures); BNN not reported ('/')",
        _LAURENT_COLS,
        (
            ('one', 'Dropout', 9.5, 4.9, 56.4, 14.2, 60.3, 70.8, 87.6, 9.5, 13.5),
            ('one', 'BNN', None, None, None, None, None, None, None, None, None),
            ('one', 'SGHMC', 9.8, 5.3, 54.4, 2.3, 58.9, 78.1, 74.4, 0.1, 0.2),
            ('one', 'SWAG', 9.1, 3.9, 61.7, 10.0, 51.8, 84.6, 66.7, 3.3, 9.0),
            ('one', 'Laplace', 5.5, 6.1, 29.7, 7.4, 81.3, 62.3, 82.3, 211.7, 254.8),
            ('multi', 'Dropout', 4.3, 1.8, 65.3, 10.5, 48.2, 90.9, 57.7, 41.9, 93.2),
            ('multi', 'BNN', None, None, None, None, None, None, None, None, None),
            ('multi', 'SWAG', 6.7, 5.4, 64.8, 2.3, 46.6, 98.4, 53.6, 20.5, 55.2),
            ('multi', 'Laplace', 0.5, 3.1, 34.4, 13.0, 79.3, 64.4, 77.2, 227.4, 267.2),
            ('multi', 'DE', 0.0, 0.0, 65.4, 8.5, 47.3, 94.2, 41.6, 44.7, 108.5),
        ),
    ),
    "laurent2024/tableB4_mnist": ReportedTable(
        "laurent2024",
        "Table B.4 (App. B.4), MNIST / OptuNet, MMD aggregated over the 20 kernels",
        _LAURENT_B4_COLS,
        (
            ('one', 'Dropout', 14.9, 14.6, 22.9, 14.3, 14.3, 22.5),
            ('one', 'BNN', 18.8, 18.3, 29.5, 17.1, 17.0, 27.4),
            ('one', 'SGHMC', 16.7, 16.6, 27.8, 17.7, 18.3, 32.2),
            ('one', 'SWAG', 15.9, 15.8, 25.9, 14.6, 13.8, 21.6),
            ('one', 'Laplace', 10.6, 10.5, 19.1, 9.5, 9.4, 16.4),
            ('multi', 'Dropout', 2.1, 2.3, 4.1, 2.1, 2.0, 3.5),
            ('multi', 'BNN', 2.8, 2.9, 5.8, 2.5, 2.4, 4.3),
            ('multi', 'SWAG', 1.8, 2.0, 4.1, 1.3, 1.3, 2.5),
            ('multi', 'Laplace', 1.8, 2.0, 4.1, 0.8, 0.8, 1.5),
            ('multi', 'DE', 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        ),
    ),
    "laurent2024/tableB4_cifar100": ReportedTable(
        "laurent2024",
        "Table B.4 (App. B.4), CIFAR-100 / ResNet-18",
        _LAURENT_B4_COLS,
        (
            ('one', 'Dropout', 4.5, 4.6, 7.2, 7.4, 7.5, 12.0),
            ('one', 'BNN', 9.0, 9.2, 14.6, 10.0, 10.2, 16.0),
            ('one', 'SGHMC', 7.5, 7.3, 11.0, 7.9, 8.0, 13.0),
            ('one', 'SWAG', 6.7, 7.0, 11.2, 7.2, 7.5, 12.3),
            ('one', 'Laplace', 5.7, 6.0, 9.7, 7.0, 7.2, 11.7),
            ('multi', 'Dropout', 0.7, 0.7, 1.2, 4.4, 4.5, 7.5),
            ('multi', 'BNN', 6.1, 6.3, 10.6, 5.6, 5.8, 10.0),
            ('multi', 'SWAG', 5.0, 5.2, 8.4, 5.4, 5.6, 9.2),
            ('multi', 'Laplace', 0.6, 0.6, 1.0, 4.3, 4.4, 7.2),
            ('multi', 'DE', 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        ),
    ),
    "laurent2024/tableB4_tinyimagenet": ReportedTable(
        "laurent2024",
        "Table B.4 (App. B.4), TinyImageNet / ResNet-18; BNN not reported ('/')",
        _LAURENT_B4_COLS,
        (
            ('one', 'Dropout', 9.5, 9.6, 15.0, 4.9, 5.0, 7.8),
            ('one', 'BNN', None, None, None, None, None, None),
            ('one', 'SGHMC', 9.8, 10.0, 15.7, 5.3, 5.2, 7.9),
            ('one', 'SWAG', 9.1, 9.5, 15.6, 5.4, 5.6, 9.5),
            ('one', 'Laplace', 5.5, 5.8, 9.6, 6.1, 6.3, 10.1),
            ('multi', 'Dropout', 4.3, 4.4, 7.4, 1.8, 1.8, 3.0),
            ('multi', 'BNN', None, None, None, None, None, None),
            ('multi', 'SWAG', 6.7, 6.9, 11.3, 3.9, 4.2, 7.3),
            ('multi', 'Laplace', 0.6, 0.6, 9.9, 3.1, 3.2, 5.3),
            ('multi', 'DE', 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        ),
    ),
}


def reported(key: str) -> ReportedTable:
    """The reported table ``key``; unknown keys fail listing the valid ones."""
    return lookup(REPORTED, key)
