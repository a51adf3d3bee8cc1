module updown (
  input  logic       clk,
  input  logic       rst,
  input  logic       up,
  input  logic       down,
  output logic [3:0] count
);
  always_ff @(posedge clk) begin
    if (rst) count <= 0;
    else if (up && !down) count <= count + 1;
    else if (down && !up) count <= count - 1;
  end
endmodule
