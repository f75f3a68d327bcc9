INSERT INTO greeting VALUES (1, 'hello from this preview''s own database');
