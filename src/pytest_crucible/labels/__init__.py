"""People's labels of answers and what they measure: the judge calibrated against them
(``calibration``) and the judge's bias corrected with them (``human``, PPI++)."""
