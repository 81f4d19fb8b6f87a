"""What the tests share: fake services, generated repositories, environments. Imported as ``support.…``."""
