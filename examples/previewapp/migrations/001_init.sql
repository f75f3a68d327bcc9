CREATE TABLE greeting (id int PRIMARY KEY, text text NOT NULL);
