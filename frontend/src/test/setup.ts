import "@testing-library/react";
